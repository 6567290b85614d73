/* qinglong panel: the pages with the controls over projects, tasks and triggers. The tasks
 * page lists the projects (archive, unarchive, pause with a reason, resume) and the tasks (run
 * now, enable, disable, delete); a trigger's page has fire now, enable, disable, delete, pause
 * and resume, a backfill with its progress, and the occurrence ledger. A control that changes
 * or removes something asks first, beside itself; a refusal shows the API's problem next to
 * the control. A control the user may not use for its project is never built (or is hidden).
 */
(function () {
  "use strict";

  var QL = window.QL;
  var $ = QL.$, el = QL.el, clear = QL.clear, api = QL.api, seg = QL.seg, query = QL.query;
  var showResult = QL.showResult, showProblem = QL.showProblem, describe = QL.describe;
  var allowed = QL.allowed, badge = QL.badge, row = QL.row, when = QL.when;

  /* A result next to a control: a problem (the API's refusal) or a note. */
  function note(node, error, text) {
    clear(node);
    if (error) node.appendChild(el("span", { class: "problem" }, describe(error)));
    else if (text) node.appendChild(el("span", { class: "ok-note" }, text));
  }

  function button(text, attrs, onclick) {
    attrs.type = "button";
    attrs.onclick = onclick;
    return el("button", attrs, text);
  }

  /* A button that asks ``question`` beside itself, then sends the request ``send`` makes;
     ``done`` gets the answer, a refusal goes into ``result``. */
  function confirmed(text, attrs, question, yes, result, send, done) {
    return button(text, attrs, function (event) {
      var control = event.currentTarget;
      QL.confirmBeside(control, question, yes, function () {
        note(result, null, "");
        return send().then(done, function (e) { note(result, e); });
      });
    });
  }

  /* What a confirmed action does once its request is answered: draw the lists again, then
     say ``text`` (so what is said is already shown). */
  function toldAfter(reload, text) {
    return function () {
      return reload().then(function () { showResult("tasks-result", null, text); });
    };
  }

  function pausedText(paused, total) {
    if (!paused.length) return total ? "none of " + total : "no trigger";
    var reasons = [];
    paused.forEach(function (t) {
      var reason = t.pause && t.pause.reason;
      if (reason && reasons.indexOf(reason) < 0) reasons.push(reason);
    });
    return paused.length + " of " + total + (reasons.length ? " (" + reasons.join("; ") + ")"
      : " (no reason given)");
  }

  // --- the tasks page: projects and tasks ------------------------------------------------------

  function tasksPage() {
    var tables = ["projects", "trigger-list", "tasks"].map($);
    var busy = function (yes) {  // a table being drawn again is busy: read or click it after
      tables.forEach(function (t) { if (t) t.setAttribute("aria-busy", yes ? "true" : "false"); });
    };
    var reload = function () {
      busy(true);
      return Promise.all([QL.projectsInto(null), api("GET", "/triggers" + query({ next: 0 }))])
        .then(function (got) {
          var projects = got[0];
          return QL.pool(projects, 4, function (p) {
            return api("GET", "/projects/" + seg(p.id) + "/tasks");
          }).then(function (lists) {
            showProblem("problem", null);
            drawProjects(projects, got[1], reload);
            drawTriggerList(got[1], reload);
            drawTasks(projects, lists, reload);
          });
        }).catch(function (e) { showProblem("problem", e); })
        .then(function () { busy(false); });
    };
    reload();
  }

  function drawProjects(projects, triggers, reload) {
    var tbody = clear($("projects").tBodies[0]);
    if (!projects.length) { QL.emptyRow(tbody, 5, "No projects yet."); return; }
    projects.forEach(function (p) {
      var own = triggers.filter(function (t) { return t.project === p.id; });
      var paused = own.filter(function (t) { return t.state === "paused"; });
      var result = el("span", { class: "row-result", role: "status" });
      var cell = el("td", { class: "controls" });
      var base = "/projects/" + seg(p.id);
      if (allowed("operate", p.id)) {
        var reasonId = "project-reason-" + p.id;
        cell.appendChild(el("label", { for: reasonId, class: "sr" }, "Reason to pause " + p.id));
        var reason = el("input", { id: reasonId, class: "pause-reason", maxlength: 500,
          placeholder: "reason (optional)", size: 14 });
        cell.appendChild(reason);
        cell.appendChild(confirmed("Pause", { "data-action": "pause", "data-project": p.id },
          "Pause every trigger of " + p.id + "?", "Pause", result, function () {
            var data = {};
            if (reason.value.trim()) data.reason = reason.value.trim();
            return api("POST", base + "/pause", data);
          }, toldAfter(reload, "Paused the triggers of " + p.id + ".")));
        if (paused.length) {
          cell.appendChild(confirmed("Resume", { "data-action": "resume", "data-project": p.id },
            "Resume the paused triggers of " + p.id + "?", "Resume", result, function () {
              return api("POST", base + "/resume", {});
            }, toldAfter(reload, "Resumed the triggers of " + p.id + ".")));
        }
      }
      if (allowed("admin", p.id)) {
        var archived = p.status === "archived";
        var word = archived ? "unarchive" : "archive";
        cell.appendChild(confirmed(archived ? "Unarchive" : "Archive",
          { "data-action": word, "data-project": p.id, class: archived ? "" : "danger" },
          archived ? "Unarchive " + p.id + "? Its triggers fire again."
            : "Archive " + p.id + "? None of its triggers fires until it is unarchived.",
          archived ? "Unarchive" : "Archive", result, function () {
            return api("POST", base + "/" + word, {});
          }, toldAfter(reload, (archived ? "Unarchived " : "Archived ") + p.id + ".")));
      }
      cell.appendChild(result);
      tbody.appendChild(row([el("strong", {}, p.id), p.name, badge(p.status),
        el("span", { class: "paused-note" }, pausedText(paused, own.length)), cell],
        { "data-project-row": p.id, "data-project": p.id }));
    });
  }

  /* A trigger's state, and why it is paused. */
  function stateOf(t) {
    if (t.state !== "paused" || !t.pause) return badge(t.state);
    return el("span", {}, badge(t.state), " (" + (t.pause.reason || "no reason given") + ")");
  }

  function drawTriggerList(triggers, reload) {
    var tbody = clear($("trigger-list").tBodies[0]);
    if (!triggers.length) { QL.emptyRow(tbody, 5, "No triggers yet."); return; }
    triggers.forEach(function (t) {
      var key = t.project + "/" + t.trigger;
      var path = "/projects/" + seg(t.project) + "/triggers/" + seg(t.trigger);
      var cell = el("td", { class: "controls" });
      var result = el("span", { class: "row-result", role: "status" });
      if (allowed("operate", t.project)) {
        var word = t.enabled ? "disable" : "enable";
        cell.appendChild(confirmed(t.enabled ? "Disable" : "Enable",
          { "data-action": word, "data-trigger": key },
          t.enabled ? "Disable " + key + "? It stops firing." : "Enable " + key + "?",
          t.enabled ? "Disable" : "Enable", result, function () {
            return api("POST", path + "/" + word, {});
          }, toldAfter(reload, (t.enabled ? "Disabled " : "Enabled ") + key + ".")));
      }
      if (allowed("admin", t.project)) {
        cell.appendChild(confirmed("Delete", { class: "danger", "data-action": "delete",
          "data-trigger": key }, "Delete " + key + "? It stops firing and leaves the lists; " +
          "its revisions and Runs stay.", "Delete", result, function () {
          return api("DELETE", path);
        }, toldAfter(reload, "Deleted " + key + ".")));
      }
      cell.appendChild(result);
      tbody.appendChild(row([QL.triggerLink(t.project, t.trigger), t.task,
        el("code", {}, t.schedule || t.cron || ""), stateOf(t), cell],
        { "data-trigger-row": key, "data-project": t.project }));
    });
  }

  function taskControls(t, reload) {
    var cell = el("td", { class: "controls" });
    var result = el("span", { class: "row-result", role: "status" });
    var key = t.project + "/" + t.task;
    var path = "/projects/" + seg(t.project) + "/tasks/" + seg(t.task);
    if (allowed("operate", t.project)) {
      cell.appendChild(button("Run now", { class: "run-now", "data-task": key }, function (event) {
        var control = event.currentTarget;
        control.disabled = true;
        api("POST", path + "/run", { request_id: QL.requestId() }).then(function (run) {
          location.assign("/runs/" + seg(run.id));
        }).catch(function (e) {
          control.disabled = false;
          note(result, e);
        });
      }));
      var word = t.enabled ? "disable" : "enable";
      cell.appendChild(confirmed(t.enabled ? "Disable" : "Enable",
        { "data-action": word, "data-task": key },
        t.enabled ? "Disable " + key + "? Its triggers stop." : "Enable " + key + "?",
        t.enabled ? "Disable" : "Enable", result, function () {
          return api("POST", path + "/" + word, {});
        }, toldAfter(reload, (t.enabled ? "Disabled " : "Enabled ") + key + ".")));
    }
    if (allowed("admin", t.project)) {
      cell.appendChild(el("a", { href: "/tasks/edit" + query({ project: t.project,
        task: t.task }) }, "Edit"));
      cell.appendChild(confirmed("Delete", { class: "danger", "data-action": "delete",
        "data-task": key }, "Delete " + key + "? It leaves the lists; its revisions stay.",
        "Delete", result, function () { return api("DELETE", path); },
        toldAfter(reload, "Deleted " + key + ".")));
    }
    cell.appendChild(el("a", { href: "/runs" + query({ project: t.project, task: t.task }) },
      "Runs"));
    cell.appendChild(result);
    return cell;
  }

  function drawTasks(projects, lists, reload) {
    var tbody = clear($("tasks").tBodies[0]);
    var count = 0;
    lists.forEach(function (tasks, i) {
      if (!Array.isArray(tasks)) return;
      tasks.forEach(function (t) {
        count++;
        tbody.appendChild(row([
          projects[i].id,
          [el("strong", {}, t.task), t.name && t.name !== t.task ? [" ", el("span",
            { class: "muted" }, t.name)] : null],
          el("code", {}, QL.commandText(t.command)),
          el("td", { class: "num" }, t.revision),
          t.enabled ? "yes" : "no",
          t.environment.length ? t.environment.join(", ") : "—",
          QL.duration(t.timeout_ms),
          t.requires && t.requires.length ? t.requires.join(", ") : "any worker",
          taskControls(t, reload)
        ], { "data-task": t.project + "/" + t.task, "data-project": t.project }));
      });
    });
    if (!count) QL.emptyRow(tbody, 9, "No tasks yet.");
  }

  // --- one trigger: its controls, backfill and ledger --------------------------------------

  function triggerPage() {
    var project = QL.body.getAttribute("data-project");
    var trigger = QL.body.getAttribute("data-trigger");
    var base = "/projects/" + seg(project) + "/triggers/" + seg(trigger);
    var result = $("trigger-action-result");
    var shown = null;  // the trigger as last drawn
    $("trigger-title").textContent = project + "/" + trigger;
    $("trigger-edit").setAttribute("href", "/triggers/edit" + query({ project: project,
      trigger: trigger }));
    $("trigger-runs").setAttribute("href", "/runs" + query({ project: project,
      trigger: trigger }));
    var draw = function (t) {
      shown = t;
      drawTrigger(t);
      var toggle = $("trigger-switch");
      toggle.hidden = !allowed("operate", project) || t.state === "deleted";
      toggle.textContent = t.enabled ? "Disable" : "Enable";
      toggle.setAttribute("data-action", t.enabled ? "disable" : "enable");
      $("trigger-delete").hidden = !allowed("admin", project) || t.state === "deleted";
    };
    var refresh = function () {
      return api("GET", base + "?next=5").then(draw)
        .catch(function (e) { showProblem("problem", e); });
    };
    $("trigger-fire").addEventListener("click", function (event) {
      var control = event.currentTarget;
      control.disabled = true;
      api("POST", base + "/fire", { request_id: QL.requestId() }).then(function (run) {
        location.assign("/runs/" + seg(run.id));
      }).catch(function (e) {
        control.disabled = false;
        note(result, e);
      });
    });
    $("trigger-switch").addEventListener("click", function (event) {
      if (!shown) return;
      var word = shown.enabled ? "disable" : "enable";
      QL.confirmBeside(event.currentTarget, (shown.enabled ? "Disable " : "Enable ") + project +
        "/" + trigger + "?" + (shown.enabled ? " It stops firing." : ""),
        shown.enabled ? "Disable" : "Enable", function () {
          return api("POST", base + "/" + word, {}).then(function () {
            note(result, null, word === "disable" ? "Disabled. " : "Enabled. ");
            return refresh();
          }, function (e) { note(result, e); });
        });
    });
    $("trigger-delete").addEventListener("click", function (event) {
      QL.confirmBeside(event.currentTarget, "Delete " + project + "/" + trigger + "? It stops " +
        "firing and leaves the lists; its revisions and Runs stay.", "Delete", function () {
        return api("DELETE", base).then(function () {
          note(result, null, "Deleted. ");
          return refresh();
        }, function (e) { note(result, e); });
      });
    });
    $("pause-form").addEventListener("submit", function (event) {
      event.preventDefault();
      var until = $("pause-until").value.trim();
      var reason = $("pause-reason").value.trim();
      var data = {};
      if (until) data.until = /^[0-9]+$/.test(until) ? Number(until) : until;
      if (reason) data.reason = reason;
      api("POST", base + "/pause", data).then(function () {
        showResult("trigger-action-result", null, "Paused. ");
        return refresh();
      }).catch(function (e) { showResult("trigger-action-result", e); });
    });
    $("trigger-resume").addEventListener("click", function () {
      api("POST", base + "/resume", {}).then(function () {
        showResult("trigger-action-result", null, "Resumed. ");
        return refresh();
      }).catch(function (e) { showResult("trigger-action-result", e); });
    });
    var loadLedger = function () {
      var windowMs = Number($("ledger-window").value);
      var now = Date.now();
      return api("GET", base + "/ledger" + query({ from: new Date(now - windowMs).toISOString(),
        limit: $("ledger-limit").value })).then(drawLedger)
        .catch(function (e) { showProblem("problem", e); });
    };
    $("ledger-window").addEventListener("change", loadLedger);
    $("ledger-limit").addEventListener("change", loadLedger);
    if (allowed("operate", project)) backfiller(base, function () { return shown; }, loadLedger);
    QL.every(10000, function () {
      return Promise.all([api("GET", base + "?next=5").then(draw), loadLedger()])
        .catch(function (e) { showProblem("problem", e); });
    });
  }

  function drawTrigger(t) {
    showProblem("problem", null);
    var local = QL.local;
    var pause = t.pause;
    QL.details($("trigger-details"), [
      ["State", stateOf(t)],
      ["Enabled", t.enabled ? "yes" : "no"],
      ["Task", [t.task, el("span", { class: "muted" }, " (revision " + t.task_revision + ")")]],
      ["Starts flow", t.flow ? el("a", { href: "/flows" }, t.flow) : null],
      ["Values", t.parameters && Object.keys(t.parameters).length ? Object.keys(t.parameters)
        .sort().map(function (k) { return k + "=" + t.parameters[k]; }).join(", ") : null],
      ["Schedule", el("code", {}, t.schedule || t.cron || "")],
      ["Kind", t.kind],
      ["DST", t.dst ? "gap " + t.dst.gap + ", overlap " + t.dst.overlap : null],
      ["Jitter", t.jitter ? "up to " + t.jitter.max_s + " s (" + t.jitter.random_s +
        " s drawn per occurrence, stable offset " + t.jitter.stable_s + " s)" : null],
      ["Time zone", t.timezone],
      ["Misfire", t.misfire],
      ["Overlap", t.overlap + (t.overlap === "queue" ? " (at most " + t.overlap_queue_limit +
        " waiting)" : "")],
      ["Revision", String(t.revision)],
      ["Published", when(t.published_at)],
      ["Paused", pause ? "since " + local(pause.since) + (pause.until ? " until " +
        local(pause.until) : "") + (pause.reason ? " (" + pause.reason + ")" : "") : null],
      ["Last scheduled", t.last_scheduled_at ? when(t.last_scheduled_at) : null]
    ]);
    var tbody = clear($("next-fires").tBodies[0]);
    if (!t.next_fire_at_ms.length) { QL.emptyRow(tbody, 3, "No upcoming fire."); return; }
    t.next_fire_at_ms.forEach(function (ms, i) {
      tbody.appendChild(row([QL.zoned(t.next_fire_local[i] || ""), local(ms), QL.utc(ms)]));
    });
  }

  function drawLedger(view) {
    var local = QL.local;
    var counts = Object.keys(view.counts).sort().map(function (fate) {
      return view.counts[fate] + " " + fate;
    });
    $("ledger-counts").textContent = "From " + local(view.from) + " to " + local(view.to) + ": " +
      (counts.length ? counts.join(", ") : "no occurrences") +
      (view.not_shown ? " (" + view.not_shown + " older not shown)" : "") + ".";
    var tbody = clear($("ledger").tBodies[0]);
    if (!view.occurrences.length) {
      QL.emptyRow(tbody, 6, "No occurrences in this window.");
      return;
    }
    view.occurrences.forEach(function (o) {
      var runs = o.runs.length ? o.runs.map(function (r) {
        return el("span", { class: "ledger-run" }, QL.runLink(r.id), " ", badge(r.status), " ");
      }) : "—";
      tbody.appendChild(row([QL.zoned(o.local), local(o.at_ms), QL.utc(o.at_ms),
        el("td", { class: "num" }, o.revision), badge(o.fate), runs]));
    });
  }

  // --- backfill ---------------------------------------------------------------------------------

  var CHUNK = 20;  // occurrences a request admits: the progress moves after each
  var PLAN_ROWS = 50;

  /* A window's end as the API reads it: RFC 3339 or epoch milliseconds as typed, or a
     duration (2h, 10m) before now. */
  function instantOf(text, what) {
    var value = text.trim();
    if (/^\d+$/.test(value)) return Number(value);
    if (/^\d{4}-/.test(value)) return value;
    try {
      return Date.now() - QL.parseDuration(value);
    } catch (e) {
      throw new QL.ApiError(400, { title: "Not sent", detail: what + ": " + e.message +
        "; or an instant such as 2027-01-01T09:00:00Z", field: what });
    }
  }

  function backfiller(base, current, loadLedger) {
    var plan = null;
    var stopping = false;
    var result = $("backfill-result");
    var runButton = $("backfill-run");
    var stop = $("backfill-stop");

    function zone() { var t = current(); return t ? t.timezone : "UTC"; }

    function drawPlan(view) {
      plan = view;
      var tbody = clear($("backfill-plan").tBodies[0]);
      note(result, null, "From " + QL.local(view.from_ms) + " to " + QL.local(view.to_ms) + ": " +
        view.occurrences + " occurrences, " + view.already_had_run + " already with a Run, " +
        view.to_admit + " to admit.");
      result.setAttribute("data-to-admit", String(view.to_admit));
      view.to_admit_ms.slice(0, PLAN_ROWS).forEach(function (ms, i) {
        tbody.appendChild(row([el("td", { class: "num" }, i + 1), QL.stamp(ms, zone()),
          QL.local(ms), QL.utc(ms)]));
      });
      if (view.to_admit > PLAN_ROWS) {
        QL.emptyRow(tbody, 4, "… and " + (view.to_admit - PLAN_ROWS) + " more.");
      }
      if (!view.to_admit) QL.emptyRow(tbody, 4, "Nothing to admit: every occurrence has a Run.");
      runButton.disabled = !view.to_admit;
    }

    $("backfill-form").addEventListener("submit", function (event) {
      event.preventDefault();
      var data;
      try {
        data = { from: instantOf($("backfill-from").value, "from"),
          to: instantOf($("backfill-to").value, "to"), dry_run: true };
      } catch (e) { note(result, e); return; }
      runButton.disabled = true;
      clear($("backfill-plan").tBodies[0]);
      api("POST", base + "/backfill", data).then(drawPlan, function (e) {
        plan = null;
        note(result, e);
      });
    });

    function progress(done, total, counts) {
      $("backfill-state").hidden = false;
      var bar = $("backfill-progress");
      bar.max = Math.max(total, 1);
      bar.value = done;
      $("backfill-count").textContent = counts.admitted + " admitted, " + counts.existing +
        " already had a Run, of " + total + " (" + Math.round(100 * done / Math.max(total, 1)) +
        "%)";
      $("backfill-count").setAttribute("data-done", String(done));
    }

    function run() {
      var occurrences = plan.to_admit_ms;
      var total = occurrences.length;
      var counts = { admitted: 0, existing: 0, inDoubt: 0 };
      var log = clear($("backfill-log"));
      var started = Date.now();
      var index = 0;
      stopping = false;
      stop.hidden = false;
      stop.disabled = false;
      runButton.disabled = true;
      note(result, null, "Backfilling…");
      progress(0, total, counts);
      function step() {
        if (index >= total || stopping) return Promise.resolve(null);
        var chunk = occurrences.slice(index, index + CHUNK);
        return api("POST", base + "/backfill", { from: chunk[0], to: chunk[chunk.length - 1] })
          .then(function (view) {
            counts.admitted += view.admitted || 0;
            counts.existing += view.already_had_run || 0;
            counts.inDoubt += view.in_doubt || 0;
            index += chunk.length;
            progress(index, total, counts);
            log.appendChild(el("li", { "data-done": index }, QL.utc(chunk[0]) + " to " +
              QL.utc(chunk[chunk.length - 1]) + ": " + (view.admitted || 0) + " admitted"));
            if (view.error) throw new QL.ApiError(500, view.error);
            return step();
          });
      }
      return step().then(function () {
        var took = QL.duration(Date.now() - started);
        note(result, null, (stopping ? "Stopped: " : "Done: ") + counts.admitted +
          " admitted, " + counts.existing + " already had a Run" + (counts.inDoubt ? ", " +
          counts.inDoubt + " confirmed after a lost reply" : "") + ", in " + took + "." +
          (stopping ? " Backfill the same window again to carry on." : ""));
        result.setAttribute("data-state", stopping ? "interrupted" : "done");
      }, function (e) {
        note(result, e);
        result.appendChild(document.createTextNode(" After " + counts.admitted + " admitted; " +
          "backfill the same window again to carry on."));
        result.setAttribute("data-state", "failed");
      }).then(function () {
        stop.hidden = true;
        plan = null;  // a new window is shown before the next backfill
        return loadLedger();
      }).then(function () { return false; });
    }

    runButton.addEventListener("click", function (event) {
      if (!plan || !plan.to_admit) return;
      QL.confirmBeside(event.currentTarget, "Admit " + plan.to_admit + " Runs, one for each " +
        "occurrence from " + QL.local(plan.from_ms) + " to " + QL.local(plan.to_ms) + "?",
        "Admit", run);
    });
    stop.addEventListener("click", function () {
      stopping = true;
      stop.disabled = true;
    });
  }

  QL.pages.tasks = tasksPage;
  QL.pages.trigger = triggerPage;
})();
