/* qinglong panel: the dashboard. A page of triggers at a time from one request,
 * GET /api/v1/triggers/summary (each trigger's state, next fire, latest Run, success rate and
 * largest lag, computed in the database for the whole page), then the recent Runs, the queue
 * and the processes: four requests per refresh, however many triggers there are (two for a
 * user who may read some projects only: the queue and the processes are the installation's).
 *
 * Hand-written, no framework, no build step: every value from the API reaches the page as text
 * (QL.el, textContent). Loaded after panel.js; registers QL.pages.dashboard.
 */
(function () {
  "use strict";

  var QL = window.QL;
  var $ = QL.$, el = QL.el, clear = QL.clear, row = QL.row, emptyRow = QL.emptyRow;
  var badge = QL.badge, api = QL.api, query = QL.query, local = QL.local, utc = QL.utc;
  var relative = QL.relative, duration = QL.duration, when = QL.when, runLink = QL.runLink;
  var triggerLink = QL.triggerLink, showProblem = QL.showProblem;
  var REFRESH_MS = 5000;

  function rateText(window) {
    var ended = window.successes + window.failures + window.cancelled;
    if (window.success_rate === null || window.success_rate === undefined) return "—";
    return Math.round(100 * window.success_rate) + "% of " + ended;
  }

  function lastRunCell(last) {
    if (!last) return "—";
    return el("span", { title: "admitted " + local(last.created_at_ms) + " (" +
      relative(last.created_at_ms) + ")" }, runLink(last.id), " ", badge(last.status));
  }

  function stateCell(t) {
    if (!t.pause) return badge(t.state);
    var why = "paused since " + local(t.pause.since_ms) + (t.pause.until_ms === null ? ""
      : ", until " + local(t.pause.until_ms)) + (t.pause.reason ? ": " + t.pause.reason : "");
    return el("span", { title: why }, badge(t.state));
  }

  function drawTriggers(summary) {
    var tbody = clear($("triggers").tBodies[0]);
    $("dash-window").textContent = String(summary.window_runs);
    if (!summary.items.length) {
      tbody.appendChild(el("tr", {}, el("td", { class: "empty", colspan: 9 },
        "No triggers yet. ", el("a", { href: "/triggers/edit" }, "Publish one"), ".")));
      return;
    }
    var rows = document.createDocumentFragment();
    summary.items.forEach(function (t) {
      var next = t.next_fire_at_ms;
      rows.appendChild(row([
        triggerLink(t.project, t.trigger),
        t.task,
        el("span", {}, el("code", {}, t.schedule), " ", el("span", { class: "muted" },
          t.timezone)),
        stateCell(t),
        next === null ? "—" : el("span", { title: relative(next) }, local(next)),
        next === null ? "—" : utc(next),
        lastRunCell(t.last_run),
        el("td", { class: "num" }, rateText(t.window)),
        el("td", { class: "num" }, duration(t.window.max_lag_ms))
      ], { "data-trigger": t.project + "/" + t.trigger }));
    });
    tbody.appendChild(rows);
  }

  function drawRecent(runs) {
    var tbody = clear($("recent").tBodies[0]);
    if (!runs.length) { emptyRow(tbody, 6, "No Runs."); return; }
    runs.forEach(function (r) {
      tbody.appendChild(row([
        runLink(r.id),
        r.project + " / " + r.task,
        r.trigger ? triggerLink(r.project, r.trigger) : "—",
        when(r.scheduled_for || r.created_at),
        badge(r.status),
        el("td", { class: "num" }, duration(r.duration_ms))
      ], { "data-run": r.id }));
    });
  }

  function drawQueue(q) {
    $("queue-summary").textContent = q.queued + " queued" + (q.oldest_age_ms === null ? "." :
      ", the oldest for " + duration(q.oldest_age_ms) + ".") + (q.unplaceable ?
      " " + q.unplaceable + " wait for labels no live worker offers." : "");
    var tbody = clear($("queue").tBodies[0]);
    if (!q.requirements.length) {
      emptyRow(tbody, 4, "No queued Run requires worker labels.");
      return;
    }
    q.requirements.forEach(function (g) {
      tbody.appendChild(row([g.requires.join(", "), el("td", { class: "num" }, g.queued),
        duration(g.oldest_age_ms), g.unplaceable ? badge("no") : "yes"],
        { "data-requires": g.requires.join(",") }));
    });
  }

  function drawProcesses(health) {
    var tbody = clear($("processes").tBodies[0]);
    var counts = {};
    health.instances.forEach(function (p) {
      if (p.alive) counts[p.role] = (counts[p.role] || 0) + 1;
    });
    var words = Object.keys(counts).sort().map(function (role) {
      return counts[role] + " " + role + (counts[role] === 1 ? "" : "s");
    });
    $("process-summary").textContent = "Profile " + health.profile + ", version " +
      health.version + ". Alive: " + (words.length ? words.join(", ") : "none registered") + ".";
    if (!health.instances.length) {
      emptyRow(tbody, 8, "No registered processes (a standalone `ql serve` registers none).");
      return;
    }
    health.instances.forEach(function (p) {
      tbody.appendChild(row([p.role, el("span", { class: "mono" }, p.id), p.host,
        el("td", { class: "num" }, p.pid), QL.labelsText(p.labels), when(p.started_at),
        when(p.seen_at),
        badge(p.alive ? "alive" : (p.stopped_at ? "stopped" : "dead"))]));
    });
  }

  QL.pages.dashboard = function () {
    var zone = "UTC";
    try {
      zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    } catch (e) { /* an old browser: UTC */ }
    $("viewer-zone").textContent = zone;
    var project = $("dash-project"), limit = $("dash-limit");
    // cursors[i] opens page i + 1 (null: the first page); Next pushes, Previous pops
    var cursors = [null];
    var nextCursor = null;
    var asked = 0;  // a newer request wins over an older one still on its way
    var drawn = false;

    function showPager() {
      $("dash-page").textContent = "Page " + cursors.length;
      $("dash-prev").disabled = cursors.length < 2;
      $("dash-next").disabled = nextCursor === null;
    }

    function loadTriggers() {
      var mine = ++asked;
      return api("GET", "/triggers/summary" + query({  // your pins on the first pages
        project: project.value, limit: limit.value, cursor: cursors[cursors.length - 1],
        pins_first: "true"
      })).then(function (summary) {
        if (mine !== asked) return;
        nextCursor = summary.next_cursor;
        var started = performance.now();
        drawTriggers(summary);
        showPager();
        // how long the drawing took (benchmarks/dashboard.py reads it beside the whole turn)
        $("triggers").setAttribute("data-draw-ms", (performance.now() - started).toFixed(1));
        if (!drawn) {
          drawn = true;
          if (window.performance && performance.mark) performance.mark("ql-triggers-drawn");
        }
        $("triggers").setAttribute("data-drawn", String(mine));
      });
    }

    // the queue and the processes are the whole installation's: only for those who may read
    // every project (the API refuses them to a user with grants on some projects only)
    var everywhere = QL.allowed("read");
    if (!everywhere) {
      var note = "Shown to those who may read every project.";
      $("queue-summary").textContent = note;
      $("process-summary").textContent = note;
      emptyRow(clear($("queue").tBodies[0]), 4, "—");
      emptyRow(clear($("processes").tBodies[0]), 8, "—");
    }

    function refresh() {
      return Promise.all([
        loadTriggers(),
        api("GET", "/runs?limit=10").then(function (got) { drawRecent(got.items); }),
        everywhere ? api("GET", "/health").then(drawProcesses) : null,
        everywhere ? api("GET", "/queue").then(drawQueue) : null
      ]).then(function () {
        showProblem("problem", null);
        $("updated").textContent = local(Date.now());
      }).catch(function (e) { showProblem("problem", e); });
    }

    function turn(change) {
      change();
      loadTriggers().catch(function (e) { showProblem("problem", e); });
    }

    $("dash-next").addEventListener("click", function () {
      if (nextCursor !== null) turn(function () { cursors.push(nextCursor); nextCursor = null; });
    });
    $("dash-prev").addEventListener("click", function () {
      if (cursors.length > 1) turn(function () { cursors.pop(); });
    });
    function restart() { turn(function () { cursors = [null]; nextCursor = null; }); }
    project.addEventListener("change", restart);
    limit.addEventListener("change", restart);
    $("dash-filter").addEventListener("submit", function (event) { event.preventDefault(); });

    QL.projectsInto(null).then(function (projects) {
      projects.forEach(function (p) {
        project.appendChild(el("option", { value: p.id }, p.id));
      });
    }).catch(function (e) { showProblem("problem", e); });
    QL.every(REFRESH_MS, refresh);
  };
})();
