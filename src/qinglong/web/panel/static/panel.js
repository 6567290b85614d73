/* qinglong panel: fills the server-rendered pages from the HTTP API under /api/v1.
 *
 * Hand-written, no framework, no build step, nothing fetched from elsewhere. Every value from
 * the API reaches the page as text (textContent, text nodes, attributes set one by one), never
 * as markup. Reads send the session cookie; writes also send the session's CSRF token, which
 * the server put in <meta name="ql-csrf">.
 */
(function () {
  "use strict";

  var body = document.body;
  var page = body.getAttribute("data-page") || "";
  var csrfMeta = document.querySelector('meta[name="ql-csrf"]');
  var csrf = csrfMeta ? csrfMeta.getAttribute("content") : "";
  var LEVELS = { viewer: 1, operator: 2, admin: 3 };
  var NEEDS = { read: 1, operate: 2, admin: 3 };
  var ENDED = { succeeded: 1, failed: 1, cancelled: 1, timed_out: 1, lost: 1 };
  var viewerZone = "UTC";
  try {
    viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch (e) { /* an old browser: UTC */ }

  // --- DOM --------------------------------------------------------------------------------

  function $(id) { return document.getElementById(id); }

  /* el("a", {href: "/runs", class: "x"}, "text", otherNode): children are text or nodes. */
  function el(tag, attrs) {
    var node = document.createElement(tag);
    var key;
    attrs = attrs || {};
    for (key in attrs) {
      if (!Object.prototype.hasOwnProperty.call(attrs, key)) continue;
      var value = attrs[key];
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = String(value);
      else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
      else if (key === "href" && !safeHref(value)) continue;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function append(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  function safeHref(value) {
    var text = String(value);
    return text.charAt(0) === "/" && text.charAt(1) !== "/" && text.charAt(1) !== "\\";
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

  function svg(tag, attrs) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var key in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, key)) node.setAttribute(key, String(attrs[key]));
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }

  function row(cells, attrs) {
    return el("tr", attrs || {}, cells.map(function (cell) {
      if (cell instanceof Node && cell.nodeName === "TD") return cell;
      return el("td", {}, cell);
    }));
  }

  function emptyRow(tbody, columns, text) {
    tbody.appendChild(el("tr", {}, el("td", { class: "empty", colspan: columns, text: text })));
  }

  function badge(status) {
    var word = String(status === null || status === undefined ? "unknown" : status);
    return el("span", { class: "status status-" + word.replace(/[^a-z_]/g, ""), text: word });
  }

  function showProblem(target, error) {
    var node = typeof target === "string" ? $(target) : target;
    if (!node) return;
    if (!error) { node.hidden = true; node.textContent = ""; return; }
    node.textContent = describe(error);
    node.hidden = false;
  }

  function describe(error) {
    if (error && error.problem) {
      var p = error.problem;
      // a title is a sentence ("An input value breaks a rule."): no stop before the colon
      var title = String(p.title || "").replace(/[\s.:;,]+$/, "");
      var detail = String(p.detail || "");
      var text = title && detail ? title + ": " + detail : title || detail;
      // the detail of bad input starts with its field already ("trigger: must be ...")
      if (p.field && detail.indexOf(p.field + ":") !== 0) text += " (field " + p.field + ")";
      return text || ("HTTP " + error.status);
    }
    return String(error && error.message ? error.message : error);
  }

  /* May the user do what needs ``need`` (read, operate, admin) to ``project`` (the project
     the control acts on; left out: no one project)? For now the session's one role decides,
     whatever the project. */
  /* The roles the page was served with: on every project (data-role) and on single ones
     (data-grants: "project:role project:role"). A control on a project is allowed by the
     higher of the two; one on no project by the role on every project. */
  var GRANTS = {};
  (body.getAttribute("data-grants") || "").split(" ").forEach(function (pair) {
    var cut = pair.indexOf(":");
    if (cut > 0) GRANTS[pair.slice(0, cut)] = LEVELS[pair.slice(cut + 1)] || 0;
  });

  function allowed(need, project) {
    var level = LEVELS[body.getAttribute("data-role")] || 0;
    if (project && GRANTS[project] > level) level = GRANTS[project];
    return level >= (NEEDS[need] || 99);
  }

  /* Hide what the viewer's role may not do (the API refuses it anyway). A control acts on
     the project of its nearest element with data-project (the page's, on a trigger's page;
     the one chosen, on a page with a project select: see chooseProject). A control hidden
     here is shown again when another project allows it; one hidden for another reason is
     left alone. */
  function applyRoles(root) {
    var nodes = (root || document).querySelectorAll("[data-needs]");
    for (var i = 0; i < nodes.length; i++) {
      var holder = nodes[i].closest("[data-project]");
      if (!allowed(nodes[i].getAttribute("data-needs"),
          holder ? holder.getAttribute("data-project") : null)) {
        nodes[i].hidden = true;
        nodes[i].setAttribute("data-role-hidden", "");
      } else if (nodes[i].hasAttribute("data-role-hidden")) {
        nodes[i].hidden = false;
        nodes[i].removeAttribute("data-role-hidden");
      }
    }
  }

  /* A page whose forms act on the project of a select: the controls follow that project. */
  function chooseProject(project) {
    $("main").setAttribute("data-project", project || "");
    applyRoles(document);
  }

  /* A confirmation beside ``control`` (a button): the question and two buttons, Yes focused
     (Escape or No cancels and gives the focus back). On Yes, ``action`` runs; the promise it
     returns settles before the control is usable again (unless it answers false). One
     confirmation at a time per control. */
  function confirmBeside(control, question, yes, action) {
    var next = control.nextSibling;
    if (next && next.className === "confirm") return;
    var box;
    function close() {
      if (box.parentNode) box.parentNode.removeChild(box);
      control.disabled = false;
    }
    var no = el("button", { type: "button", class: "confirm-no", onclick: function () {
      close();
      control.focus();
    } }, "No");
    var go = el("button", { type: "button", class: "danger confirm-yes", onclick: function () {
      close();
      control.disabled = true;
      // an action that answers false leaves its control disabled (nothing left to do)
      Promise.resolve().then(action).catch(function () { return null; })
        .then(function (answer) { control.disabled = answer === false; });
    } }, yes);
    box = el("span", { class: "confirm", role: "alertdialog", "aria-label": question,
      onkeydown: function (event) {
        if (event.key === "Escape") { event.preventDefault(); close(); control.focus(); }
      } }, el("span", { class: "confirm-question" }, question), " ", go, " ", no);
    control.disabled = true;
    control.parentNode.insertBefore(box, control.nextSibling);
    go.focus();
  }

  // --- the API ----------------------------------------------------------------------------

  function ApiError(status, problem) {
    this.status = status;
    this.problem = problem;
    this.message = problem && problem.detail ? problem.detail : "HTTP " + status;
  }
  ApiError.prototype = Object.create(Error.prototype);

  function toLogin() {
    location.assign("/login?next=" + encodeURIComponent(location.pathname + location.search));
  }

  function api(method, path, data, headers) {
    var sent = { Accept: "application/json" };
    var options = { method: method, headers: sent, credentials: "same-origin", cache: "no-store" };
    if (method !== "GET") sent["X-CSRF-Token"] = csrf;
    if (data !== undefined) {
      sent["Content-Type"] = "application/json";
      options.body = JSON.stringify(data);
    }
    for (var name in headers || {}) sent[name] = headers[name];
    return fetch("/api/v1" + path, options).then(function (response) {
      if (response.status === 401 && page !== "login") {
        toLogin();
        throw new ApiError(401, { title: "Unauthenticated", detail: "log in again" });
      }
      if (response.status === 204) return null;
      return response.text().then(function (text) {
        var parsed = null;
        try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = null; }
        if (!response.ok) {
          throw new ApiError(response.status, parsed || { detail: text || response.statusText });
        }
        return parsed;
      });
    });
  }

  function query(params) {
    var parts = [];
    for (var key in params) {
      var value = params[key];
      if (value === null || value === undefined || value === "") continue;
      parts.push(encodeURIComponent(key) + "=" + encodeURIComponent(String(value)));
    }
    return parts.length ? "?" + parts.join("&") : "";
  }

  function seg(value) { return encodeURIComponent(String(value)); }

  function requestId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) {
      return (b + 256).toString(16).slice(1);
    }).join("");
  }

  // --- times ------------------------------------------------------------------------------

  /* One format for every instant the panel shows: 2026-03-08 17:00:00 GMT+8 in a zone (your
     browser's, or a trigger's), 2026-03-08 09:00:00 UTC in UTC. How long ago or ahead an
     instant is goes in its tooltip, never beside it. */
  var wallFormats = {};

  function wallParts(ms, zone) {
    var key = zone || "";
    if (!wallFormats[key]) {
      wallFormats[key] = new Intl.DateTimeFormat("en-US", { timeZone: zone || undefined,
        year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
        second: "2-digit", hourCycle: "h23" });
    }
    var got = {};
    wallFormats[key].formatToParts(new Date(ms)).forEach(function (p) { got[p.type] = p.value; });
    return got;
  }

  function offsetLabel(minutes) {
    if (!minutes) return "GMT";
    var size = Math.abs(minutes);
    var rest = size % 60;
    return "GMT" + (minutes < 0 ? "-" : "+") + Math.floor(size / 60) +
      (rest ? ":" + (rest < 10 ? "0" : "") + rest : "");
  }

  function stamp(ms, zone) {
    var p = wallParts(ms, zone);
    var wall = Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour),
      Number(p.minute), Number(p.second));
    var label = zone === "UTC" ? "UTC"
      : offsetLabel(Math.round((wall - Math.floor(ms / 1000) * 1000) / 60000));
    return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" +
      p.second + " " + label;
  }

  function toMs(value) {
    if (value === null || value === undefined || value === "") return null;
    if (typeof value === "number") return value;
    var parsed = Date.parse(value);
    return isNaN(parsed) ? null : parsed;
  }

  function local(value) {
    var ms = toMs(value);
    return ms === null ? "—" : stamp(ms, null);
  }

  function utc(value) {
    var ms = toMs(value);
    return ms === null ? "—" : stamp(ms, "UTC");
  }

  /* A wall time the API gives with its offset (2026-03-08T03:00:00-07:00: in a trigger's
     zone) in the panel's format: 2026-03-08 03:00:00 GMT-7. */
  function zoned(text) {
    var found = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|([+-])(\d\d):(\d\d))$/
      .exec(String(text));
    if (!found) return String(text);
    var minutes = found[3] === "Z" ? 0
      : (found[4] === "-" ? -1 : 1) * (Number(found[5]) * 60 + Number(found[6]));
    return found[1] + " " + found[2] + " " + offsetLabel(minutes);
  }

  function relative(value) {
    var ms = toMs(value);
    if (ms === null) return "";
    var delta = Math.round((ms - Date.now()) / 1000);
    var size = Math.abs(delta);
    if (size < 1) return "now";
    var text = size < 60 ? size + " s" : size < 3600 ? Math.round(size / 60) + " min"
      : size < 172800 ? Math.round(size / 3600) + " h" : Math.round(size / 86400) + " d";
    return delta >= 0 ? "in " + text : text + " ago";
  }

  /* Durations as the CLI and the API read them (qinglong.domain.durations, mirrored): 500ms,
     30s, 1.5h, or parts from the largest unit down (1h30m, 2d4h, 1m 30s). A number without
     a unit is refused, never read as seconds. Throws an Error that says why. */
  var DURATION_UNITS = { d: 86400000, h: 3600000, m: 60000, s: 1000, ms: 1 };
  var DURATION_ORDER = ["d", "h", "m", "s", "ms"];

  function parseDuration(text) {
    var hint = "'" + text + "' is not a duration; use numbers with units (d, h, m, s, ms), " +
      "largest first: 500ms, 30s, 5m, 1h30m, 1d";
    var part = /\s*(\d{1,15}(?:\.\d{1,6})?)\s*(ms|s|m|h|d)/y;
    var stripped = String(text).replace(/\s+$/, "");
    var total = 0, last = -1, found;
    part.lastIndex = 0;
    while (part.lastIndex < stripped.length) {
      found = part.exec(stripped);
      if (!found) throw new Error(hint);
      var unit = DURATION_ORDER.indexOf(found[2]);
      if (unit <= last) throw new Error(hint);
      last = unit;
      total += Number(found[1]) * DURATION_UNITS[found[2]];
    }
    if (last < 0) throw new Error(hint);
    if (!Number.isInteger(total)) throw new Error("'" + text + "' is not a whole number of " +
      "milliseconds");
    if (total > Number.MAX_SAFE_INTEGER) throw new Error("'" + text + "' is too long");
    return total;
  }

  /* The shortest text parseDuration reads back as ms: 1h30m, 500ms. */
  function durationText(ms) {
    var parts = [];
    var rest = ms;
    DURATION_ORDER.forEach(function (unit) {
      var size = DURATION_UNITS[unit];
      if (rest >= size) {
        parts.push(Math.floor(rest / size) + unit);
        rest %= size;
      }
    });
    return parts.join("") || "0s";
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return "—";
    if (ms < 1000) return ms + " ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s - m * 60) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  }

  function when(value) {
    return el("span", { title: utc(value) + " (" + relative(value) + ")" }, local(value));
  }

  function shortId(id) { return String(id).slice(0, 8); }

  function runLink(id) { return el("a", { href: "/runs/" + seg(id), class: "mono" }, shortId(id)); }

  function triggerLink(project, trigger) {
    return el("a", { href: "/triggers/" + seg(project) + "/" + seg(trigger) },
      project + "/" + trigger);
  }

  // --- repeating work -----------------------------------------------------------------------

  /* Run ``work`` now and every ``ms`` while the tab is visible, never two at once. */
  function every(ms, work) {
    var busy = false;
    function tick() {
      if (busy || document.hidden) return;
      busy = true;
      Promise.resolve().then(work).catch(function () { /* shown by work */ })
        .then(function () { busy = false; });
    }
    tick();
    var timer = setInterval(tick, ms);
    return function () { clearInterval(timer); };
  }

  /* Call ``fn`` on each item with at most ``limit`` calls in flight. */
  function pool(items, limit, fn) {
    var results = new Array(items.length);
    var next = 0;
    function worker() {
      if (next >= items.length) return Promise.resolve();
      var index = next++;
      return Promise.resolve(fn(items[index])).then(function (value) {
        results[index] = value;
      }, function (error) { results[index] = { error: error }; }).then(worker);
    }
    var workers = [];
    for (var i = 0; i < Math.min(limit, items.length); i++) workers.push(worker());
    return Promise.all(workers).then(function () { return results; });
  }

  function debounce(ms, fn) {
    var timer = null;
    return function () {
      if (timer !== null) clearTimeout(timer);
      timer = setTimeout(function () { timer = null; fn(); }, ms);
    };
  }

  function projectsInto(datalist) {
    return api("GET", "/projects").then(function (projects) {
      if (datalist) {
        clear(datalist);
        projects.forEach(function (p) { datalist.appendChild(el("option", { value: p.id })); });
      }
      return projects;
    });
  }

  // --- the common header ----------------------------------------------------------------------

  function setupHeader() {
    var logout = $("logout");
    if (logout) {
      logout.addEventListener("click", function () {
        logout.disabled = true;
        api("DELETE", "/session").catch(function () { return null; }).then(function () {
          location.assign("/login");
        });
      });
    }
    applyRoles(document);
  }

  // --- login ---------------------------------------------------------------------------------

  function loginPage() {
    var form = $("login-form");
    var error = $("login-error");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = $("login-submit");
      button.disabled = true;
      showProblem(error, null);
      var sent = {
        username: $("login-username").value.trim(),
        password: $("login-password").value
      };
      var second = $("login-second");
      if (second && !second.hidden) { // the server asked for the second factor
        var otp = $("login-otp").value.trim();
        var recovery = $("login-recovery").value.trim();
        if (otp) sent.otp = otp;
        else if (recovery) sent.recovery_code = recovery;
      }
      api("POST", "/session", sent).then(function () {
        var next = body.getAttribute("data-next") || "/";
        location.assign(safeHref(next) ? next : "/");
      }).catch(function (e) {
        if (second && e.problem && e.problem.code === "QL_SECOND_FACTOR_REQUIRED") {
          // the password was right: keep it, and ask for the code (a wrong one said so)
          var asked = !second.hidden;
          second.hidden = false;
          $("login-otp").value = "";
          $("login-recovery").value = "";
          showProblem(error, asked ? e : null);
          $("login-otp").focus();
        } else {
          $("login-password").value = "";
          showProblem(error, e);
        }
        button.disabled = false;
      });
    });
  }

  // What a worker offers for placement (docs/controls/placement.md): region=eu, gpu
  function labelsText(labels) {
    var keys = Object.keys(labels || {}).sort();
    if (!keys.length) return "—";
    return keys.map(function (k) { return labels[k] === null ? k : k + "=" + labels[k]; })
      .join(", ");
  }

  // --- what the task and trigger pages share (their pages are in editors.js, controls.js) ----

  function commandText(command) {
    if (!command) return "";
    if (command.kind === "shell") return command.shell + " -c " + command.command;
    return (command.argv || []).join(" ");
  }

  function showResult(id, error, text) {
    var node = clear($(id));
    if (error) node.appendChild(el("span", { class: "problem" }, describe(error)));
    else node.appendChild(el("span", { class: "ok-note" }, text));
    return node;
  }

  function ensureProject(project) {
    return api("GET", "/projects/" + seg(project)).catch(function (e) {
      if (e.status !== 404) throw e;
      return api("POST", "/projects", { id: project }).catch(function (again) {
        if (again.status !== 409) throw again;
        return null;
      });
    });
  }

  /* A size as the CLI writes one: 512M, 3G (powers of 1024), or bytes. */
  function sizeText(size) {
    var units = [["T", 1099511627776], ["G", 1073741824], ["M", 1048576], ["K", 1024]];
    for (var i = 0; i < units.length; i++) {
      if (size % units[i][1] === 0) return (size / units[i][1]) + units[i][0];
    }
    return String(size);
  }

  function parseSize(text) {
    var found = /^\s*(\d+)\s*([KMGT]i?B?|B)?\s*$/i.exec(text);
    if (!found) throw new Error("a size such as 512M, 2G or 1073741824 (bytes)");
    var unit = (found[2] || "").toUpperCase().replace(/B$/, "").replace(/I$/, "");
    var factor = { "": 1, K: 1024, M: 1048576, G: 1073741824, T: 1099511627776 }[unit];
    return Number(found[1]) * factor;
  }

  function details(dl, pairs) {
    clear(dl);
    pairs.forEach(function (pair) {
      if (pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      dl.appendChild(el("dt", {}, pair[0]));
      dl.appendChild(el("dd", {}, pair[1]));
    });
  }

  // --- Runs ---------------------------------------------------------------------------------

  function runsPage() {
    var params = new URLSearchParams(location.search);
    var fields = ["status", "project", "task", "trigger"];
    fields.forEach(function (name) {
      if (params.get(name)) $("filter-" + name).value = params.get(name);
    });
    var cursors = [null];  // the cursor of each page shown so far
    var index = 0;
    var nextCursor = null;
    var filters = function () {
      var found = {};
      fields.forEach(function (name) { found[name] = $("filter-" + name).value.trim(); });
      return found;
    };
    var asked = 0;  // loads asked for; only the latest one's answer is drawn
    var load = function () {
      var mine = ++asked;
      var wanted = filters();
      wanted.limit = 25;
      wanted.cursor = cursors[index];
      return api("GET", "/runs" + query(wanted)).then(function (answer) {
        // a refresh of page 1 answered after a click on Next must not draw page 1 as page 2
        if (mine !== asked) return;
        showProblem("problem", null);
        nextCursor = answer.next_cursor;
        var tbody = clear($("runs").tBodies[0]);
        if (!answer.items.length) emptyRow(tbody, 9, "No Runs match.");
        answer.items.forEach(function (r) {
          tbody.appendChild(row([
            runLink(r.id), r.project + " / " + r.task,
            r.trigger ? triggerLink(r.project, r.trigger) : "—",
            r.trigger_type,
            r.scheduled_for ? when(r.scheduled_for) : "—",
            when(r.created_at),
            badge(r.status),
            el("td", { class: "num" }, duration(r.duration_ms)),
            el("td", { class: "num" }, r.exit_code === null ? "" : r.exit_code)
          ], { "data-run": r.id, "data-status": r.status }));
        });
        $("page-label").textContent = "Page " + (index + 1);
        $("page-prev").disabled = index === 0;
        $("page-next").disabled = !nextCursor;
      }).catch(function (e) { if (mine === asked) showProblem("problem", e); });
    };
    $("run-filter").addEventListener("submit", function (event) {
      event.preventDefault();
      cursors = [null];
      index = 0;
      history.replaceState(null, "", "/runs" + query(filters()));
      load();
    });
    $("page-next").addEventListener("click", function () {
      if (!nextCursor) return;
      cursors = cursors.slice(0, index + 1);
      cursors.push(nextCursor);
      index++;
      load();
    });
    $("page-prev").addEventListener("click", function () {
      if (index === 0) return;
      index--;
      load();
    });
    // the first page follows new Runs; later pages stay put (their cursor fixes them)
    var first = true;
    every(3000, function () {
      if (index !== 0 && !first) return null;
      first = false;
      return load();
    });
  }

  // --- one Run ------------------------------------------------------------------------------

  function runPage() {
    var runId = body.getAttribute("data-run");
    var path = "/runs/" + seg(runId);
    var following = null;
    var ended = false;
    var stop = null;
    $("run-title").textContent = shortId(runId);
    $("run-cancel").addEventListener("click", function (event) {
      var button = event.currentTarget;
      button.disabled = true;
      api("POST", path + "/cancel", {}).then(function (view) {
        showResult("cancel-result", null, view.cancel === "done" ? "Cancelled."
          : "Cancel requested: the executor is stopping it.");
        refresh();
      }).catch(function (e) {
        button.disabled = false;
        showResult("cancel-result", e);
      });
    });

    function refresh() {
      return api("GET", path + "?tail=0").then(function (detail) {
        showProblem("problem", null);
        drawRun(detail);
        var status = detail.run.status;
        if (ENDED[status]) {
          ended = true;
          if (stop) { stop(); stop = null; }
        }
        if (!following && detail.attempts.length) following = follow(detail.run.id);
        if (ended && !detail.attempts.length) {
          $("log-state").textContent = "the Run ended (" + status + ") before any attempt: no log";
        }
        return detail;
      }).catch(function (e) { showProblem("problem", e); });
    }
    stop = every(1500, refresh);
  }

  function drawRun(detail) {
    var r = detail.run;
    document.title = "Run " + shortId(r.id) + " · qinglong";
    $("run-title").textContent = shortId(r.id);
    clear($("run-status")).appendChild(badge(r.status));
    var cancel = $("run-cancel");
    cancel.hidden = !!ENDED[r.status] || !allowed("operate", r.project);
    details($("run-details"), [
      ["Id", el("span", { class: "mono" }, r.id)],
      ["Status", badge(r.status)],
      ["Project / task", [r.project + " / ", el("a", { href: "/runs" + query({ project: r.project,
        task: r.task }) }, r.task), el("span", { class: "muted" }, " (revision " +
        r.task_revision + ")")]],
      ["Trigger", r.trigger ? triggerLink(r.project, r.trigger) : null],
      ["Type", r.trigger_type + " (" + r.origin + ")"],
      ["Flow run", r.trigger_type === "flow" && r.triggered_by ? flowRunLink(r.triggered_by)
        : null],
      ["Requested by", r.requested_by || (r.trigger_type === "flow" ? null : r.triggered_by)],
      ["Scheduled for", r.scheduled_for ? [local(r.scheduled_for), " · ", utc(r.scheduled_for)]
        : null],
      ["Admitted", [local(r.created_at), " · ", utc(r.created_at)]],
      ["Admission lag", r.admission_lag_ms === null ? null : duration(r.admission_lag_ms)],
      ["Started", r.started_at ? when(r.started_at) : null],
      ["Finished", r.finished_at ? when(r.finished_at) : null],
      ["Duration", r.duration_ms === null ? null : duration(r.duration_ms)],
      ["Exit code", r.exit_code === null ? null : String(r.exit_code)],
      ["Error", r.error_code ? r.error_code + (r.error_summary ? ": " + r.error_summary : "")
        : null],
      ["Cancel reason", r.cancel_reason],
      ["Parameters", r.parameters && Object.keys(r.parameters).length ?
        Object.keys(r.parameters).sort().map(function (k) {
          return k + "=" + JSON.stringify(r.parameters[k]);
        }).join(", ") : null],
      ["Requires", r.requires && r.requires.length ? r.requires.join(", ") : null],
      ["Waiting", detail.unplaceable ? detail.unplaceable + ": it stays queued until a worker " +
        "with these labels is running" : null]
    ]);
    var tbody = clear($("attempts").tBodies[0]);
    if (!detail.attempts.length) emptyRow(tbody, 8, "No attempt yet.");
    detail.attempts.forEach(function (a) {
      tbody.appendChild(row([el("td", { class: "num" }, a.attempt), badge(a.status),
        a.executor_type + (a.worker ? " (" + a.worker + ")" : ""),
        el("td", { class: "num" }, a.pid === null ? "" : a.pid),
        a.started_at ? when(a.started_at) : "—", a.finished_at ? when(a.finished_at) : "—",
        el("td", { class: "num" }, a.exit_code === null ? "" : a.exit_code),
        a.error_code ? a.error_code + (a.error_summary ? ": " + a.error_summary : "") : ""]));
    });
    var list = clear($("timeline"));
    detail.events.forEach(function (e) {
      list.appendChild(el("li", { "data-event": e.type },
        el("span", { class: "when", title: utc(e.at_ms) }, local(e.at_ms)),
        el("span", { class: "type" }, e.type),
        e.summary,
        el("span", { class: "actor" }, e.actor)));
    });
  }

  var LOG_LIMIT = 2 * 1024 * 1024;  // characters kept on the page

  /* What a log may hold that a terminal would act on, made inert: colour and style sequences
     (SGR: ESC [ ... m) are dropped; every other control character (an escape starting any
     other sequence, a bell, a lone carriage return, a bidirectional override, ...) is shown
     as its code, e.g. \x1b, in a span of class ctl; tabs and line ends stay. Returns a
     function of one chunk giving the pieces to append (text and spans); a sequence cut by a
     chunk's end waits for the next chunk (``last``: there is none). */
  var SGR = /\x1b\[[0-9;:]*m/g;
  var CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  var CUT = /(?:\x1b(?:\[[0-9;:]*)?|\r)$/;

  function controlCode(ch) {
    var code = ch.charCodeAt(0).toString(16);
    return code.length <= 2 ? "\\x" + ("0" + code).slice(-2) : "\\u" + ("000" + code).slice(-4);
  }

  function terminalFilter() {
    var held = "";
    return function (chunk, last) {
      var text = held + chunk;
      held = "";
      var cut = last ? null : CUT.exec(text);
      if (cut && text.length - cut.index <= 64) {
        held = text.slice(cut.index);
        text = text.slice(0, cut.index);
      }
      text = text.replace(SGR, "").replace(/\r\n/g, "\n");
      var pieces = [];
      var from = 0;
      var found;
      CONTROL.lastIndex = 0;
      while ((found = CONTROL.exec(text)) !== null) {
        if (found.index > from) pieces.push(text.slice(from, found.index));
        pieces.push(el("span", { class: "ctl", title: "a control character" },
          controlCode(found[0])));
        from = found.index + 1;
      }
      if (from < text.length) pieces.push(text.slice(from));
      return pieces;
    };
  }

  /* Follow the latest attempt's log over server-sent events until the Run ends. */
  function follow(runId) {
    var pre = $("log");
    var state = $("log-state");
    var opened = false;
    var done = false;
    var filter = terminalFilter();
    var source = new EventSource("/api/v1/runs/" + seg(runId) + "/logs?follow=true");
    state.textContent = "connecting…";
    source.addEventListener("open", function () {
      if (opened) {  // a reconnect sends the log again from its start
        pre.textContent = "";
        filter = terminalFilter();
      }
      opened = true;
      state.textContent = "following live…";
    });
    source.addEventListener("log", function (event) {
      var data = JSON.parse(event.data);
      var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      append(pre, filter(String(data.text), false));
      if (pre.textContent.length > LOG_LIMIT) {
        pre.textContent = "[earlier output dropped]\n" + pre.textContent.slice(-LOG_LIMIT / 2);
      }
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    });
    source.addEventListener("end", function (event) {
      done = true;
      source.close();
      append(pre, filter("", true));  // what a cut sequence held back
      var data = JSON.parse(event.data);
      state.textContent = "the Run ended: " + data.status;
      state.setAttribute("data-ended", data.status);
    });
    source.addEventListener("error", function (event) {
      if (done) return;
      if (event.data) {  // an error event the server sent: a problem object
        done = true;
        source.close();
        append(pre, filter("", true));
        var problem = {};
        try { problem = JSON.parse(event.data); } catch (e) { problem = {}; }
        state.textContent = describe(new ApiError(problem.status || 500, problem));
        return;
      }
      state.textContent = source.readyState === EventSource.CLOSED
        ? "the log stream closed" : "reconnecting…";
    });
    return source;
  }

  // --- stats --------------------------------------------------------------------------------

  function statsPage() {
    var params = new URLSearchParams(location.search);
    var zone = viewerZone;
    if (params.get("days")) $("stats-days").value = params.get("days");
    var load = function () {
      var project = $("stats-project").value;
      if (!project) return Promise.resolve();
      var days = Number($("stats-days").value) || 7;
      var to = dayIn(Date.now(), zone);
      var from = addDays(to, -(days - 1));
      history.replaceState(null, "", "/stats" + query({ project: project,
        task: $("stats-task").value, days: days }));
      return api("GET", "/projects/" + seg(project) + "/stats" + query({
        task: $("stats-task").value, from: from, to: to, timezone: zone
      })).then(function (view) {
        showProblem("problem", null);
        $("stats-zone").textContent = "Days of " + view.timezone + ", " + view.from + " to " +
          view.to + ".";
        drawChart(view);
        drawStatsTables(view);
      }).catch(function (e) {
        if (e.problem && e.problem.field === "timezone" && zone !== "UTC") {
          zone = "UTC";  // the server does not know the browser's zone
          return load();
        }
        showProblem("problem", e);
        return null;
      });
    };
    var loadTasks = function () {
      var project = $("stats-project").value;
      var select = $("stats-task");
      return api("GET", "/projects/" + seg(project) + "/tasks").then(function (tasks) {
        var keep = select.value || params.get("task") || "";
        clear(select).appendChild(el("option", { value: "" }, "(every task)"));
        tasks.forEach(function (t) { select.appendChild(el("option", { value: t.task }, t.task)); });
        select.value = keep;
        if (select.value !== keep) select.value = "";
      }).catch(function () { return null; });
    };
    projectsInto(null).then(function (projects) {
      var select = $("stats-project");
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      if (params.get("project")) select.value = params.get("project");
      if (!projects.length) { showProblem("problem", "No projects yet."); return null; }
      return loadTasks().then(load);
    }).catch(function (e) { showProblem("problem", e); });
    $("stats-project").addEventListener("change", function () {
      $("stats-task").value = "";
      loadTasks().then(load);
    });
    $("stats-task").addEventListener("change", load);
    $("stats-days").addEventListener("change", load);
  }

  function dayIn(ms, zone) {
    try {
      var parts = new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric",
        month: "2-digit", day: "2-digit" }).formatToParts(new Date(ms));
      var got = {};
      parts.forEach(function (p) { got[p.type] = p.value; });
      return got.year + "-" + got.month + "-" + got.day;
    } catch (e) {
      return new Date(ms).toISOString().slice(0, 10);
    }
  }

  function addDays(day, n) {
    var d = new Date(day + "T00:00:00Z");
    d.setUTCDate(d.getUTCDate() + n);
    return d.toISOString().slice(0, 10);
  }

  var SERIES = [["successes", "#2da44e"], ["failures", "#cf222e"], ["cancelled", "#8c959f"],
    ["other", "#54aeff"]];

  function drawChart(view) {
    var byDay = {};
    view.days.forEach(function (d) {
      var sum = byDay[d.date] || { runs: 0, successes: 0, failures: 0, cancelled: 0 };
      sum.runs += d.runs; sum.successes += d.successes; sum.failures += d.failures;
      sum.cancelled += d.cancelled;
      byDay[d.date] = sum;
    });
    var days = [];
    for (var day = view.from; day <= view.to; day = addDays(day, 1)) days.push(day);
    var max = 1;
    days.forEach(function (d) { if (byDay[d] && byDay[d].runs > max) max = byDay[d].runs; });
    var width = 760, height = 260, left = 44, right = 10, top = 14, bottom = 44;
    var plotW = width - left - right, plotH = height - top - bottom;
    var slot = plotW / Math.max(1, days.length);
    var barW = Math.max(2, Math.min(48, slot * 0.7));
    var chart = svg("svg", { viewBox: "0 0 " + width + " " + height, width: width,
      height: height, role: "img", "aria-label": "Runs per day", id: "stats-svg" });
    [0, 0.5, 1].forEach(function (f) {
      var y = top + plotH - f * plotH;
      chart.appendChild(svg("line", { x1: left, x2: width - right, y1: y, y2: y,
        stroke: "#d9dee4", "stroke-width": 1 }));
      chart.appendChild(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end",
        "font-size": 11, fill: "#5d6875" }, String(Math.round(f * max))));
    });
    var labelEvery = Math.ceil(days.length / 12);
    days.forEach(function (d, i) {
      var x = left + i * slot + (slot - barW) / 2;
      var sum = byDay[d] || { runs: 0, successes: 0, failures: 0, cancelled: 0 };
      var parts = { successes: sum.successes, failures: sum.failures, cancelled: sum.cancelled,
        other: Math.max(0, sum.runs - sum.successes - sum.failures - sum.cancelled) };
      var y = top + plotH;
      var group = svg("g", { class: "bar", "data-day": d, "data-runs": sum.runs },
        svg("title", {}, d + ": " + sum.runs + " Runs, " + sum.successes + " succeeded, " +
          sum.failures + " failed, " + sum.cancelled + " cancelled"));
      SERIES.forEach(function (s) {
        var h = (parts[s[0]] / max) * plotH;
        if (h <= 0) return;
        y -= h;
        group.appendChild(svg("rect", { x: x.toFixed(1), y: y.toFixed(1), width: barW.toFixed(1),
          height: h.toFixed(1), fill: s[1], "data-series": s[0] }));
      });
      chart.appendChild(group);
      if (i % labelEvery === 0) {
        chart.appendChild(svg("text", { x: (x + barW / 2).toFixed(1), y: height - bottom + 16,
          "text-anchor": "middle", "font-size": 11, fill: "#5d6875" }, d.slice(5)));
      }
    });
    clear($("stats-chart")).appendChild(chart);
    var legend = clear($("stats-legend"));
    SERIES.forEach(function (s) {
      legend.appendChild(el("span", {}, el("span", { class: "swatch swatch-" + s[0] }), s[0]));
    });
  }

  function drawStatsTables(view) {
    var totals = clear($("stats-totals").tBodies[0]);
    if (!view.totals.length) emptyRow(totals, 8, "No Runs in this window.");
    view.totals.forEach(function (t) {
      var ended = t.successes + t.failures + t.cancelled;
      totals.appendChild(row([t.task, el("td", { class: "num" }, t.runs),
        el("td", { class: "num" }, t.successes), el("td", { class: "num" }, t.failures),
        el("td", { class: "num" }, t.cancelled),
        el("td", { class: "num" }, ended ? Math.round((100 * t.successes) / ended) + "%" : "—"),
        el("td", { class: "num" }, ended ? duration(Math.round(t.total_duration_ms / ended)) : "—"),
        el("td", { class: "num" }, duration(t.max_duration_ms))]));
    });
    var rows = clear($("stats-days-table").tBodies[0]);
    if (!view.days.length) emptyRow(rows, 8, "No Runs in this window.");
    view.days.slice().reverse().forEach(function (d) {
      rows.appendChild(row([d.date, d.task, el("td", { class: "num" }, d.runs),
        el("td", { class: "num" }, d.successes), el("td", { class: "num" }, d.failures),
        el("td", { class: "num" }, d.cancelled),
        el("td", { class: "num" }, duration(d.total_duration_ms)),
        el("td", { class: "num" }, duration(d.max_duration_ms))]));
    });
  }

  // --- flows ----------------------------------------------------------------------------------

  var FLOW_ENDED = { succeeded: 1, failed: 1, cancelled: 1 };

  function flowRunLink(id) {
    return el("a", { href: "/flows/runs/" + seg(id), class: "mono" }, shortId(id));
  }

  function flowsPage() {
    var select = $("flows-project");
    function load() {
      var project = select.value;
      if (!project) return Promise.resolve();
      return Promise.all([
        api("GET", "/projects/" + seg(project) + "/flows"),
        api("GET", "/flow-runs" + query({ project: project, limit: 50 }))
      ]).then(function (got) {
        showProblem("problem", null);
        drawFlows(project, got[0]);
        drawFlowRuns(got[1]);
      }).catch(function (e) { showProblem("problem", e); });
    }
    projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      select.addEventListener("change", load);
      every(3000, load);
    }).catch(function (e) { showProblem("problem", e); });
  }

  function drawFlows(project, flows) {
    var tbody = clear($("flows").tBodies[0]);
    if (!flows.length) emptyRow(tbody, 7, "No flow in this project.");
    flows.forEach(function (f) {
      var start = el("button", { type: "button", "data-needs": "operate", "data-flow": f.flow,
        onclick: function (event) {
          var button = event.currentTarget;
          button.disabled = true;
          api("POST", "/projects/" + seg(project) + "/flows/" + seg(f.flow) + "/run",
              { request_id: requestId() }).then(function (view) {
            showResult("start-result", null, "Started flow run ").appendChild(flowRunLink(view.id));
          }).catch(function (e) { showResult("start-result", e); })
            .then(function () { button.disabled = false; });
        } }, "Start");
      tbody.appendChild(row([el("span", { class: "mono" }, f.flow), f.name,
        el("td", { class: "num" }, f.revision), el("td", { class: "num" }, f.nodes.length),
        f.failure, f.timeout_ms ? duration(f.timeout_ms) : "—", start], { "data-project": project }));
    });
    applyRoles(tbody);
  }

  function flowStarter(r) {
    return r.trigger ? "trigger " + r.trigger : r.requested_by;
  }

  function drawFlowRuns(runs) {
    var tbody = clear($("flow-runs").tBodies[0]);
    if (!runs.length) emptyRow(tbody, 6, "No flow run yet.");
    runs.forEach(function (r) {
      tbody.appendChild(row([flowRunLink(r.id), r.flow, badge(r.status), when(r.created_at),
        flowStarter(r), r.finished_at ? when(r.finished_at) : "-"]));
    });
  }

  function flowRunPage() {
    var id = body.getAttribute("data-flow_run");
    var stop = null;
    var revision = null;  // the flow's graph (one revision per flow run: read once)
    $("flow-run-title").textContent = shortId(id);
    $("flow-run-cancel").addEventListener("click", function (event) {
      var button = event.currentTarget;
      button.disabled = true;
      api("POST", "/flow-runs/" + seg(id) + "/cancel", {}).then(function () {
        showResult("cancel-result", null, "Cancelled: queued Runs ended, running ones asked " +
          "to stop, pending nodes skipped.");
        refresh();
      }).catch(function (e) {
        button.disabled = false;
        showResult("cancel-result", e);
      });
    });
    function refresh() {
      return api("GET", "/flow-runs/" + seg(id)).then(function (run) {
        var graph = revision && revision.revision === run.revision ? Promise.resolve(revision)
          : api("GET", "/projects/" + seg(run.project) + "/flows/" + seg(run.flow));
        return graph.then(function (flow) {
          revision = flow;
          showProblem("problem", null);
          drawFlowRun(run, flow.revision === run.revision ? flow : null);
          if (FLOW_ENDED[run.status] && stop) { stop(); stop = null; }
        });
      }).catch(function (e) { showProblem("problem", e); });
    }
    stop = every(1500, refresh);
  }

  function drawFlowRun(run, flow) {
    document.title = "Flow run " + shortId(run.id) + " · qinglong";
    clear($("flow-run-status")).appendChild(badge(run.status));
    $("flow-run-cancel").hidden = !!FLOW_ENDED[run.status] || !allowed("operate", run.project);
    details($("flow-run-details"), [
      ["Id", el("span", { class: "mono" }, run.id)],
      ["Flow", run.project + " / " + run.flow + " (revision " + run.revision + ")"],
      ["Status", [badge(run.status), run.ended_reason ? " (" + run.ended_reason + ")" : ""]],
      ["Started by", run.trigger ? flowStarter(run) + " · its occurrence of " +
        when(run.scheduled_for) : run.requested_by + " · request " + run.request_id],
      ["Started", when(run.created_at)],
      ["Deadline", run.deadline_at ? when(run.deadline_at) : null],
      ["Finished", run.finished_at ? when(run.finished_at) : null],
      ["Parameters", Object.keys(run.parameters).length ? Object.keys(run.parameters).sort()
        .map(function (k) { return k + "=" + JSON.stringify(run.parameters[k]); }).join(", ")
        : null]
    ]);
    var steps = {};
    run.steps.forEach(function (s) { steps[s.node] = s; });
    var box = clear($("flow-graph"));
    if (flow) box.appendChild(flowGraph(flow, steps));
    else box.appendChild(el("p", { class: "muted" }, "The graph of revision " + run.revision +
      " is not the flow's current one; the table below has every node."));
    var tbody = clear($("flow-steps").tBodies[0]);
    run.steps.forEach(function (s) {
      tbody.appendChild(row([el("span", { class: "mono" }, s.node), s.task, badge(s.state),
        s.run ? runLink(s.run) : "—", s.run_status ? badge(s.run_status) : "—",
        s.released_at ? when(s.released_at) : "—", s.ended_at ? when(s.ended_at) : "—",
        s.error || (s.cancel_requested ? "cancel requested" : "")], { "data-node": s.node }));
    });
  }

  /* The graph as SVG: one column per depth (the longest path from a root), nodes coloured by
     state and linked to their Run, edges drawn by condition. */
  var NODE_W = 168, NODE_H = 46, GAP_X = 64, GAP_Y = 22;

  function flowGraph(flow, steps) {
    var depth = {};
    function depthOf(node, seen) {
      if (depth[node.id] !== undefined) return depth[node.id];
      if (seen[node.id]) return 0;  // (a cycle cannot be published; stay safe anyway)
      seen[node.id] = true;
      var d = 0;
      node.after.forEach(function (e) {
        var up = flow.nodes.filter(function (n) { return n.id === e.node; })[0];
        if (up) d = Math.max(d, depthOf(up, seen) + 1);
      });
      depth[node.id] = d;
      return d;
    }
    var columns = [];
    flow.nodes.forEach(function (n) {
      var d = depthOf(n, {});
      (columns[d] = columns[d] || []).push(n);
    });
    var place = {};
    var tallest = 0;
    columns.forEach(function (column, c) {
      tallest = Math.max(tallest, column.length);
      column.forEach(function (n, r) {
        place[n.id] = { x: 10 + c * (NODE_W + GAP_X), y: 10 + r * (NODE_H + GAP_Y) };
      });
    });
    var width = 20 + columns.length * (NODE_W + GAP_X) - GAP_X;
    var height = 20 + tallest * (NODE_H + GAP_Y) - GAP_Y;
    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height,
      role: "img", "aria-label": "flow graph", class: "flow" });
    root.appendChild(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10,
      refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "flow-arrow" }))));
    flow.nodes.forEach(function (n) {
      n.after.forEach(function (e) {
        var from = place[e.node], to = place[n.id];
        if (!from || !to) return;
        var x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
        var mid = (x1 + x2) / 2;
        root.appendChild(svg("path", { d: "M " + x1 + " " + y1 + " C " + mid + " " + y1 + ", " +
          mid + " " + y2 + ", " + x2 + " " + y2, class: "flow-edge flow-edge-" + e.on,
          "marker-end": "url(#arrow)", "data-edge": e.node + ">" + n.id },
          svg("title", {}, e.node + " → " + n.id + " on " + e.on)));
      });
    });
    flow.nodes.forEach(function (n) {
      var at = place[n.id];
      var step = steps[n.id] || {};
      var state = step.state || "pending";
      var group = svg("g", { class: "flow-node flow-node-" + state, "data-node": n.id,
        "data-state": state, transform: "translate(" + at.x + "," + at.y + ")" },
        svg("rect", { width: NODE_W, height: NODE_H, rx: 6 }),
        svg("text", { x: 10, y: 19, class: "flow-node-id" }, n.id),
        svg("text", { x: 10, y: 36, class: "flow-node-task" },
          n.task + " · " + state + (n.after.length > 1 ? " · join " + n.join : "")),
        svg("title", {}, n.id + ": task " + n.task + ", " + state +
          (step.run_status ? ", Run " + step.run_status : "")));
      if (step.run) {
        var link = svg("a", { href: "/runs/" + seg(step.run) });
        link.appendChild(group);
        root.appendChild(link);
      } else {
        root.appendChild(group);
      }
    });
    return root;
  }

  // --- scripts --------------------------------------------------------------------------------

  /* The script editor: a textarea over a highlighted copy of its text, with line numbers; a
     save sends the revision it was loaded at, so a save made since is refused, never
     overwritten. A viewer reads the text and its history, with no write control. */
  function scriptsPage() {
    var select = $("scripts-project");
    var text = $("script-text");
    var open = null; // {project, path, revision, content}: the revision the editor holds
    var language = "";
    var writable = false; // may the user change the open script's project (set by show)

    function paint() {
      var value = text.value;
      var lines = value.split("\n").length;
      var numbers = [];
      for (var i = 1; i <= lines; i++) numbers.push(String(i));
      $("script-gutter").textContent = numbers.join("\n");
      var target = clear($("script-highlight"));
      var pieces = value.length > 200000 ? [["", value]]
        : window.QlEditor.tokens(value, language);
      pieces.forEach(function (p) {
        target.appendChild(p[0] ? el("span", { class: "tok-" + p[0] }, p[1])
          : document.createTextNode(p[1]));
      });
      target.appendChild(document.createTextNode("\n")); // a last empty line keeps its height
      sync();
    }

    function sync() { // the numbers and the highlighted copy follow the textarea's scroll
      var target = $("script-highlight");
      $("script-gutter").scrollTop = text.scrollTop;
      target.scrollTop = text.scrollTop;
      target.scrollLeft = text.scrollLeft;
    }

    function dirty() { return open !== null && text.value !== open.content; }

    function loadList() {
      var project = select.value;
      if (!project) return Promise.resolve();
      chooseProject(project);
      return api("GET", "/projects/" + seg(project) + "/scripts").then(function (scripts) {
        if (select.value !== project) return; // another project was chosen meanwhile
        showProblem("problem", null);
        var tbody = clear($("scripts").tBodies[0]);
        if (!scripts.length) emptyRow(tbody, 4, "No script in this project.");
        scripts.forEach(function (s) {
          var link = el("a", { href: "#", class: "mono", "data-path": s.path,
            onclick: function (event) { event.preventDefault(); openScript(project, s.path); } },
          s.path);
          tbody.appendChild(row([link, el("td", { class: "num" }, s.revision),
            el("td", { class: "num" }, s.size_bytes), when(s.created_at)]));
        });
      }).catch(function (e) { showProblem("problem", e); });
    }

    function show(project, path, revision, content) {
      open = { project: project, path: path, revision: revision, content: content };
      writable = allowed("admin", project);
      text.readOnly = !writable;
      language = window.QlEditor.languageOf(path, "");
      $("script-path").textContent = project + "/" + path;
      $("script-revision").textContent = revision ? " revision " + revision : " (new)";
      $("script-code").hidden = false;
      $("script-actions").hidden = false;
      $("script-remove").hidden = !writable || !revision;
      $("script-diff-view").hidden = true;
      text.value = content;
      paint();
      return loadHistory();
    }

    function openScript(project, path) {
      if (dirty() && !window.confirm("Discard the unsaved changes to " + open.path + "?")) {
        return Promise.resolve();
      }
      return api("GET", "/projects/" + seg(project) + "/scripts/content" + query({ path: path }))
        .then(function (s) { return show(project, path, s.revision, s.content); })
        .catch(function (e) { showProblem("problem", e); });
    }

    function loadHistory() {
      var tbody = clear($("script-history").tBodies[0]);
      if (!open || !open.revision) { emptyRow(tbody, 6, "Not saved yet."); return null; }
      return api("GET", "/projects/" + seg(open.project) + "/scripts/history" +
          query({ path: open.path, limit: 50 })).then(function (revisions) {
        revisions.forEach(function (r) {
          tbody.appendChild(row([el("td", { class: "num" }, r.revision),
            el("span", { class: "mono" }, r.digest ? r.digest.slice(0, 12) : "removed"),
            el("td", { class: "num" }, r.size_bytes === null ? "—" : r.size_bytes),
            r.source, r.created_by, when(r.created_at)]));
        });
      }).catch(function (e) { showProblem("problem", e); });
    }

    function showDiff() {
      var view = clear($("script-diff-view"));
      view.hidden = false;
      var lines = window.QlEditor.lineDiff(open.content, text.value);
      if (lines === null) {
        view.appendChild(document.createTextNode("Too large to compare here: use ql script diff."));
        return;
      }
      var changed = lines.some(function (l) { return l.op !== " "; });
      if (!changed) {
        view.appendChild(document.createTextNode("No change against revision " +
          (open.revision || "(new)") + "."));
        return;
      }
      view.appendChild(el("span", { class: "diff-head" }, "--- " + open.path + "@" +
        (open.revision || 0) + " (running)\n+++ " + open.path + " (this editor)\n"));
      lines.forEach(function (l) {
        var cls = l.op === "+" ? "diff-add" : l.op === "-" ? "diff-del" : "diff-same";
        view.appendChild(el("span", { class: cls }, l.op + " " + l.text + "\n"));
      });
    }

    function save() {
      var button = $("script-save");
      button.disabled = true;
      api("PUT", "/projects/" + seg(open.project) + "/scripts/content", {
        path: open.path, content: text.value, expected_revision: open.revision || 0,
        keep_tasks: $("script-keep-tasks").checked
      }).then(function (saved) {
        var note = saved.changed ? "Saved revision " + saved.revision + "."
          : "Unchanged at revision " + saved.revision + ".";
        if (saved.tasks_updated.length) note += " Tasks now running it: " + saved.tasks_updated.join(", ") + ".";
        if (saved.tasks_behind.length) note += " Tasks left on an older revision: " + saved.tasks_behind.join(", ") + ".";
        showResult("script-result", null, note);
        open.revision = saved.revision;
        open.content = text.value;
        $("script-revision").textContent = " revision " + saved.revision;
        $("script-remove").hidden = false;
        loadHistory();
        loadList();
      }).catch(function (e) { showResult("script-result", e); })
        .then(function () { button.disabled = false; });
    }

    function remove() {
      if (!window.confirm("Remove " + open.path + "? Its history stays; tasks that run it keep " +
          "the content they pinned.")) return;
      api("DELETE", "/projects/" + seg(open.project) + "/scripts/content" +
          query({ path: open.path, expected_revision: open.revision })).then(function () {
        showResult("script-result", null, "Removed " + open.path + ".");
        open = null;
        $("script-code").hidden = true;
        $("script-actions").hidden = true;
        $("script-path").textContent = "No script open";
        $("script-revision").textContent = "";
        clear($("script-history").tBodies[0]);
        loadList();
      }).catch(function (e) { showResult("script-result", e); });
    }

    text.addEventListener("input", paint);
    text.addEventListener("scroll", sync);
    text.addEventListener("keydown", function (event) {
      if (event.key === "Tab" && !event.ctrlKey && !event.altKey && !event.metaKey &&
          !text.readOnly && !event.shiftKey) {
        event.preventDefault(); // a tab key in a script inserts four spaces
        var start = text.selectionStart;
        text.setRangeText("    ", start, text.selectionEnd, "end");
        paint();
      } else if ((event.ctrlKey || event.metaKey) && event.key === "s" && writable && open) {
        event.preventDefault();
        save();
      }
    });
    $("script-save").addEventListener("click", save);
    $("script-remove").addEventListener("click", remove);
    $("script-diff").addEventListener("click", showDiff);
    $("script-new").addEventListener("click", function () {
      var path = $("script-new-path").value.trim();
      if (!path || !select.value) return;
      show(select.value, path, 0, "");
      text.focus();
    });
    window.addEventListener("beforeunload", function (event) {
      if (dirty()) { event.preventDefault(); event.returnValue = ""; }
    });
    projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      select.addEventListener("change", loadList);
      loadList();
    }).catch(function (e) { showProblem("problem", e); });
  }

  // --- subscriptions --------------------------------------------------------------------------

  /* Git subscriptions: each pull is a Run of the subscription's pull task; Pull admits one
     and links to it. What a viewer may not do has no control on the page. */
  function subscriptionsPage() {
    var select = $("repos-project");

    function did(report) {
      if (!report) return "—";
      var parts = [report.saved.length + " saved", report.removed.length + " removed"];
      if (report.problems.length) parts.push(report.problems.length + " not imported");
      var made = report.tasks_created.length;
      if (made) parts.push(made + (made === 1 ? " task made" : " tasks made"));
      if (report.tasks_disabled.length) parts.push(report.tasks_disabled.length + " disabled");
      return parts.join(", ");
    }

    function load() {
      var project = select.value;
      if (!project) return Promise.resolve();
      chooseProject(project);
      return api("GET", "/projects/" + seg(project) + "/repos").then(function (repos) {
        if (select.value !== project) return; // another project was chosen meanwhile
        showProblem("problem", null);
        var tbody = clear($("repos").tBodies[0]);
        if (!repos.length) emptyRow(tbody, 8, "No subscription in this project.");
        repos.forEach(function (r) {
          var pull = el("button", { type: "button", "data-needs": "operate", "data-repo": r.name,
            onclick: function (event) {
              var button = event.currentTarget;
              button.disabled = true;
              api("POST", "/projects/" + seg(project) + "/repos/" + seg(r.name) + "/pull", {})
                .then(function (view) {
                  showResult("repo-result", null, "Pull admitted: Run ").appendChild(runLink(view.run));
                }).catch(function (e) { showResult("repo-result", e); })
                .then(function () { button.disabled = false; });
            } }, "Pull now");
          var remove = el("button", { type: "button", "data-needs": "admin",
            "data-remove": r.name, onclick: function () {
              if (!window.confirm("End the subscription " + r.name + "? Its pull task and " +
                  "trigger are disabled; the scripts and tasks it made stay.")) return;
              api("DELETE", "/projects/" + seg(project) + "/repos/" + seg(r.name))
                .then(function () {
                  showResult("repo-result", null, "Subscription " + r.name + " ended.");
                  load();
                }).catch(function (e) { showResult("repo-result", e); });
            } }, "Remove");
          tbody.appendChild(row([el("span", { class: "mono" }, r.name),
            el("span", { class: "mono" }, r.url), r.branch, r.auto_tasks ? "yes" : "no",
            el("span", { class: "mono" }, r.last_commit ? r.last_commit.slice(0, 12) : "—"),
            r.last_pull_at ? when(r.last_pull_at) : "never", did(r.last_report),
            el("td", {}, pull, " ", remove)], { "data-repo-row": r.name, "data-project": project }));
        });
        applyRoles(tbody);
      }).catch(function (e) { showProblem("problem", e); });
    }

    function words(id) {
      var text = $(id).value.trim();
      return text ? text.split(/\s+/) : null;
    }

    $("repo-add").addEventListener("submit", function (event) {
      event.preventDefault();
      var body = { name: $("repo-name").value.trim(), url: $("repo-url").value.trim(),
        branch: $("repo-branch").value.trim() || "main",
        timezone: $("repo-timezone").value.trim() || "UTC",
        auto_tasks: $("repo-auto-tasks").checked, exclude: words("repo-exclude") || [] };
      if (words("repo-include")) body.include = words("repo-include");
      if ($("repo-schedule").value.trim()) body.schedule = $("repo-schedule").value.trim();
      api("POST", "/projects/" + seg(select.value) + "/repos", body).then(function (view) {
        showResult("repo-result", null, "Subscribed as " + view.name + "; pull task " +
          view.pull_task + ".");
        load();
      }).catch(function (e) { showResult("repo-result", e); });
    });
    projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      select.addEventListener("change", load);
      every(5000, load);
    }).catch(function (e) { showProblem("problem", e); });
  }

  // --- project environment ------------------------------------------------------------------

  /* A project's environment: plain values are shown, a secret's never (the API has none to
     give); a value typed here goes to the server once and the field is cleared. */
  function environmentPage() {
    var select = $("env-project");

    function base() { return "/projects/" + seg(select.value) + "/environment"; }

    function load() {
      var project = select.value;
      if (!project) return Promise.resolve();
      chooseProject(project);
      return Promise.all([api("GET", base()), api("GET", base() + "/history" + query({ limit: 50 }))])
        .then(function (got) {
          if (select.value !== project) return; // another project was chosen meanwhile
          showProblem("problem", null);
          var env = got[0];
          $("env-revision").textContent = env.revision
            ? "Revision " + env.revision + " (" + (env.digest || "").slice(0, 19) + ")"
            : "No entry yet.";
          var tbody = clear($("env-entries").tBodies[0]);
          if (!env.entries.length) emptyRow(tbody, 6, "No entry in this project's environment.");
          env.entries.forEach(function (e) {
            var remove = el("button", { type: "button", "data-needs": "admin",
              "data-remove": e.name, onclick: function () {
                if (!window.confirm("Remove " + e.name + " from the environment?")) return;
                api("DELETE", base() + "/" + seg(e.name)).then(function () {
                  showResult("env-result", null, "Removed " + e.name + ".");
                  load();
                }).catch(function (err) { showResult("env-result", err); });
              } }, "Remove");
            tbody.appendChild(row([el("span", { class: "mono" }, e.name),
              e.secret ? el("span", { class: "muted", "data-secret": e.name }, "secret (set)")
                : el("span", { class: "mono" }, e.value),
              e.enabled ? "yes" : "no", e.description || "—",
              el("span", { class: "mono" }, e.value_digest.slice(0, 24)), remove],
              { "data-entry": e.name, "data-project": project }));
          });
          var history = clear($("env-history").tBodies[0]);
          got[1].forEach(function (r) {
            history.appendChild(row([el("td", { class: "num" }, r.revision), r.op,
              el("span", { class: "mono" }, r.name), r.fields.join(", ") || "—",
              r.created_by || "—", r.created_at ? when(r.created_at) : "—"]));
          });
          applyRoles(tbody);
        }).catch(function (e) { showProblem("problem", e); });
    }

    $("env-set").addEventListener("submit", function (event) {
      event.preventDefault();
      var name = $("env-name").value.trim();
      var body = { secret: $("env-secret").checked, enabled: $("env-enabled").checked };
      if ($("env-value").value !== "") body.value = $("env-value").value;
      if ($("env-description").value.trim()) body.description = $("env-description").value.trim();
      api("PUT", base() + "/" + seg(name), body).then(function (view) {
        $("env-value").value = ""; // a value is sent once, never kept on the page
        showResult("env-result", null, view.changed ? "Set " + name + ": revision " +
          view.revision + "." : name + " already was so: no new revision.");
        load();
      }).catch(function (e) { showResult("env-result", e); });
    });
    $("env-secret").addEventListener("change", function () {
      $("env-value").type = $("env-secret").checked ? "password" : "text";
    });
    projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      select.addEventListener("change", load);
      load();
    }).catch(function (e) { showProblem("problem", e); });
  }

  // --- start ----------------------------------------------------------------------------------

  var PAGES = {
    login: loginPage,
    runs: runsPage,
    run: runPage,
    flows: flowsPage,
    "flow-run": flowRunPage,
    scripts: scriptsPage,
    subscriptions: subscriptionsPage,
    environment: environmentPage,
    stats: statsPage
  };

  /* The helpers the other page scripts (loaded after this one, each registering its pages in
     QL.pages) build on. They run once every deferred script has loaded. */
  window.QL = {
    $: $, el: el, append: append, clear: clear, svg: svg, row: row, emptyRow: emptyRow,
    badge: badge, showProblem: showProblem, describe: describe, allowed: allowed,
    applyRoles: applyRoles, chooseProject: chooseProject, api: api, ApiError: ApiError, query: query, seg: seg,
    requestId: requestId, stamp: stamp, toMs: toMs, local: local, utc: utc, zoned: zoned,
    relative: relative, parseDuration: parseDuration, durationText: durationText,
    duration: duration, when: when, shortId: shortId, runLink: runLink,
    triggerLink: triggerLink, every: every, pool: pool, debounce: debounce,
    projectsInto: projectsInto, showResult: showResult,
    ensureProject: ensureProject, sizeText: sizeText, parseSize: parseSize,
    labelsText: labelsText, commandText: commandText, details: details,
    confirmBeside: confirmBeside, viewerZone: viewerZone,
    page: page, body: body, pages: PAGES
  };

  function start() {
    setupHeader();
    if (PAGES[page]) PAGES[page]();
    body.setAttribute("data-ready", "true");
  }

  // panel.js is deferred: the page scripts after it run before DOMContentLoaded (the document
  // is "interactive" meanwhile), so only a complete document starts at once
  if (document.readyState === "complete") start();
  else document.addEventListener("DOMContentLoaded", start);
})();
