/* qinglong panel: the task editor and the trigger editor. Each loads a task or a trigger into
 * every field its publish body has (web/requests.py), and a publish sends what the form
 * shows: a field left as loaded is sent as it is (the API answers "nothing changed" when
 * nothing did), an emptied field clears what may be cleared. Uses the helpers panel.js keeps
 * in window.QL; every value reaches the page as text.
 */
(function () {
  "use strict";

  var QL = window.QL;
  var $ = QL.$, el = QL.el, clear = QL.clear, api = QL.api, seg = QL.seg, query = QL.query;
  var showResult = QL.showResult, describe = QL.describe, allowed = QL.allowed;
  var parseDuration = QL.parseDuration, durationText = QL.durationText;
  var ApiError = QL.ApiError;

  /* A refusal made here, before anything is sent, in the API's problem shape. */
  function refusal(field, detail) {
    return new ApiError(400, { title: "Not published", detail: detail, field: field });
  }

  /* The lines of a one-per-line list: each kept as typed, trailing empty lines dropped. */
  function linesOf(text) {
    var found = String(text).replace(/\r/g, "").split("\n");
    while (found.length && found[found.length - 1] === "") found.pop();
    return found;
  }

  function commaList(text) {
    return text.split(",").map(function (s) { return s.trim(); }).filter(function (s) {
      return s;
    });
  }

  /* The publish button shows only to a user who may publish to the project typed. */
  function gate(button, field) {
    button.hidden = !allowed("admin", field.value.trim() || null);
  }

  // --- task editor --------------------------------------------------------------------------

  var KINDS = ["shell", "argv", "script"];

  function showKind(kind) {
    KINDS.forEach(function (k) { $("task-" + k + "-fields").hidden = k !== kind; });
  }

  function taskEditorPage() {
    var params = new URLSearchParams(location.search);
    var loaded = null;  // the task as loaded (or as last published)
    var project = $("task-project");
    QL.projectsInto($("project-list")).catch(function () { return []; });
    $("env-add").addEventListener("click", function () { addEnvRow(); });
    $("param-add").addEventListener("click", function () { addParamRow(null); });
    $("task-kind").addEventListener("change", function () { showKind($("task-kind").value); });
    $("task-timeout").addEventListener("input", noteTimeout);
    var scripts = QL.debounce(400, function () { scriptsInto(project.value.trim()); });
    project.addEventListener("input", function () {
      gate($("task-publish"), project);
      scripts();
    });
    if (params.get("project")) project.value = params.get("project");
    gate($("task-publish"), project);
    scriptsInto(project.value.trim());
    if (params.get("task")) {
      $("task-id").value = params.get("task");
      // no publishing a half-loaded form: the button waits for the task to be shown
      $("task-publish").disabled = true;
      api("GET", "/projects/" + seg(params.get("project") || "") + "/tasks/" +
        seg(params.get("task"))).then(function (t) {
        loaded = t;
        fillTask(t);
      }).catch(function (e) { showResult("task-result", e); })
        .then(function () { $("task-publish").disabled = false; });
    }
    $("task-form").addEventListener("submit", function (event) {
      event.preventDefault();
      publishTask(loaded).then(function (t) { if (t) loaded = t; });
    });
  }

  function scriptsInto(project) {
    var list = $("script-list");
    if (!project) return;
    api("GET", "/projects/" + seg(project) + "/scripts").then(function (found) {
      clear(list);
      found.forEach(function (s) { list.appendChild(el("option", { value: s.path })); });
    }).catch(function () { clear(list); });
  }

  function fillTask(t) {
    var c = t.command;
    var kind = $("task-kind");
    $("task-name").value = t.name || "";
    $("task-enabled").checked = !!t.enabled;
    kind.disabled = false;
    $("task-kind-note").textContent = "";
    if (KINDS.indexOf(c.kind) < 0) {
      // a subscription's pull task or a dependency install: the server's own command
      kind.disabled = true;
      $("task-kind-note").textContent = "This task runs " + QL.commandText(c) + " (" + c.kind +
        "): the server keeps its command; publishing here changes only the other fields.";
    } else {
      kind.value = c.kind;
    }
    if (c.kind === "shell") {
      $("task-command").value = c.command;
      $("task-shell").value = c.shell;
    } else if (c.kind === "argv") {
      $("task-argv").value = (c.argv || []).join("\n");
    } else if (c.kind === "script") {
      $("task-script-path").value = c.script || "";
      $("task-interpreter").value = c.interpreter || "";
      $("task-script-args").value = (c.argv || []).slice(2).join("\n");
    }
    showKind(kind.disabled ? "" : c.kind);
    $("task-wd").value = t.working_directory || "";
    $("task-timeout").value = t.timeout_ms ? durationText(t.timeout_ms) : "";
    noteTimeout();
    var retry = t.retry;
    $("task-attempts").value = String(retry.max_attempts);
    $("task-backoff").value = durationText(retry.backoff_ms);
    $("task-max-backoff").value = durationText(retry.max_backoff_ms);
    $("task-retry-codes").value = retry.on_exit_codes === "any" ? "any"
      : retry.on_exit_codes.join(", ");
    $("task-retry-timeout").checked = !!retry.on_timeout;
    $("task-concurrency").value = t.concurrency === null ? "" : String(t.concurrency);
    $("task-idempotent").checked = !!t.idempotent;
    $("task-requires").value = (t.requires || []).join(", ");
    $("task-memory").value = t.memory_limit_bytes ? QL.sizeText(t.memory_limit_bytes) : "";
    $("task-cpu").value = t.cpu_limit_s ? durationText(t.cpu_limit_s * 1000) : "";
    clear($("param-rows"));
    (t.parameters || []).forEach(addParamRow);
    drawExistingEnv(t.environment);
  }

  /* Beside the timeout: what the text reads as, or why it is refused. */
  function noteTimeout() {
    var text = $("task-timeout").value.trim();
    var note = clear($("task-timeout-note"));
    note.removeAttribute("data-ms");
    if (!text) return;
    try {
      var ms = parseDuration(text);
      note.className = "muted";
      note.setAttribute("data-ms", String(ms));
      note.textContent = "= " + durationText(ms);
    } catch (e) {
      note.className = "problem";
      note.textContent = e.message;
    }
  }

  function drawExistingEnv(names) {
    var list = clear($("env-existing"));
    names.forEach(function (name, i) {
      var id = "env-unset-" + i;
      list.appendChild(el("li", {}, el("code", {}, name), " ",
        el("span", { class: "muted" }, "(value set, not shown) "),
        el("input", { type: "checkbox", class: "env-unset", value: name, id: id }),
        el("label", { for: id }, " remove " + name)));
    });
  }

  var rowCount = 0;

  function removable(holder, line) {
    return el("button", { type: "button", onclick: function () { holder.removeChild(line); } },
      "Remove");
  }

  function addEnvRow() {
    var holder = $("env-new");
    var n = ++rowCount;
    var line = el("div", { class: "env-row" },
      el("label", { for: "env-name-" + n, class: "sr" }, "Name"),
      el("input", { class: "env-name", id: "env-name-" + n, placeholder: "NAME",
        spellcheck: "false" }),
      el("label", { for: "env-value-" + n, class: "sr" }, "Value"),
      el("input", { class: "env-value", id: "env-value-" + n, type: "password",
        placeholder: "value (write-only)", autocomplete: "new-password" }));
    line.appendChild(removable(holder, line));
    holder.appendChild(line);
    line.querySelector(".env-name").focus();
  }

  function addParamRow(p) {
    var holder = $("param-rows");
    var n = ++rowCount;
    var type = el("select", { class: "param-type", id: "param-type-" + n },
      ["string", "integer", "boolean"].map(function (t) { return el("option", { value: t }, t); }));
    var line = el("div", { class: "env-row param-row" },
      el("label", { for: "param-name-" + n, class: "sr" }, "Parameter name"),
      el("input", { class: "param-name", id: "param-name-" + n, placeholder: "name",
        spellcheck: "false", value: p ? p.name : "" }),
      el("label", { for: "param-type-" + n, class: "sr" }, "Type"), type,
      el("label", { for: "param-default-" + n, class: "sr" }, "Default"),
      el("input", { class: "param-default", id: "param-default-" + n,
        placeholder: "default", spellcheck: "false",
        value: p ? String(p.default) : "" }));
    if (p) type.value = p.type;
    line.appendChild(removable(holder, line));
    holder.appendChild(line);
    if (!p) line.querySelector(".param-name").focus();
  }

  /* A typed value from its text: integer and boolean parameters take 12 and true/false. */
  function typed(type, text, what) {
    if (type === "integer") {
      if (!/^-?\d+$/.test(text.trim())) throw refusal("parameters", what + ": must be an integer");
      return Number(text.trim());
    }
    if (type === "boolean") {
      if (text.trim() !== "true" && text.trim() !== "false") {
        throw refusal("parameters", what + ": must be true or false");
      }
      return text.trim() === "true";
    }
    return text;
  }

  function commandBody() {
    var kind = $("task-kind");
    if (kind.disabled) return null;  // a command only the server writes: kept
    if (kind.value === "argv") {
      var argv = linesOf($("task-argv").value);
      if (!argv.length) throw refusal("command", "command: give the program's path");
      return { kind: "argv", argv: argv };
    }
    if (kind.value === "script") {
      var path = $("task-script-path").value.trim();
      if (!path) throw refusal("command", "command: give the script's path");
      var body = { kind: "script", path: path, args: linesOf($("task-script-args").value) };
      if ($("task-interpreter").value) body.interpreter = $("task-interpreter").value;
      return body;
    }
    if (!$("task-command").value.trim()) throw refusal("command", "command: give a command");
    return { kind: "shell", command: $("task-command").value, shell: $("task-shell").value };
  }

  function durationField(id, what) {
    var text = $(id).value.trim();
    if (!text) return null;
    try { return parseDuration(text); } catch (e) { throw refusal(what, what + ": " + e.message); }
  }

  function retryBody() {
    var attempts = $("task-attempts").value.trim();
    if (attempts && !/^\d+$/.test(attempts)) {
      throw refusal("retry", "retry: attempts must be a whole number");
    }
    var backoff = durationField("task-backoff", "retry backoff");
    var most = durationField("task-max-backoff", "retry longest backoff");
    var codes = $("task-retry-codes").value.trim();
    var body = {
      max_attempts: attempts ? Number(attempts) : 1,
      backoff_ms: backoff === null ? 10000 : backoff,
      on_exit_codes: "any",
      on_timeout: $("task-retry-timeout").checked
    };
    body.max_backoff_ms = most === null ? Math.max(600000, body.backoff_ms) : most;
    if (codes && codes !== "any") {
      body.on_exit_codes = commaList(codes).map(function (c) {
        if (!/^\d+$/.test(c)) throw refusal("retry", "retry: exit codes are numbers: " + c);
        return Number(c);
      });
    }
    return body;
  }

  function limitsInto(payload) {
    var memory = $("task-memory").value.trim();
    try {
      payload.memory_limit_bytes = memory ? QL.parseSize(memory) : null;
    } catch (e) { throw refusal("limits", "memory limit: " + e.message); }
    var ms;
    try {
      ms = $("task-cpu").value.trim() ? parseDuration($("task-cpu").value.trim()) : null;
    } catch (e) { throw refusal("limits", "CPU-time limit: " + e.message); }
    if (ms !== null && ms % 1000) throw refusal("limits", "CPU-time limit: must be whole seconds");
    payload.cpu_limit_s = ms === null ? null : ms / 1000;
  }

  function parametersBody() {
    return Array.prototype.map.call(document.querySelectorAll("#param-rows .param-row"),
      function (line) {
        var name = line.querySelector(".param-name").value.trim();
        var type = line.querySelector(".param-type").value;
        if (!name) throw refusal("parameters", "parameters: each needs a name");
        return { name: name, type: type,
          default: typed(type, line.querySelector(".param-default").value, name) };
      });
  }

  function environmentInto(payload) {
    var environment = {};
    var any = false;
    var lines = document.querySelectorAll("#env-new .env-row");
    for (var i = 0; i < lines.length; i++) {
      var key = lines[i].querySelector(".env-name").value.trim();
      if (!key) continue;
      environment[key] = lines[i].querySelector(".env-value").value;
      any = true;
    }
    if (any) payload.environment = environment;
    payload.unset_environment = Array.prototype.map.call(
      document.querySelectorAll("#env-existing .env-unset:checked"),
      function (box) { return box.value; });
    payload.clear_environment = $("env-clear").checked;
  }

  /* The body of a publish: every field as the form shows it. Throws a refusal. */
  function taskBody() {
    var payload = { enabled: $("task-enabled").checked, repin_triggers: $("task-repin").checked };
    var command = commandBody();
    if (command) payload.command = command;
    var name = $("task-name").value.trim();
    if (name) payload.name = name;
    payload.working_directory = $("task-wd").value.trim() || null;
    var timeout = $("task-timeout").value.trim();
    if (timeout) {
      try {
        payload.timeout_ms = parseDuration(timeout);
      } catch (e) { throw refusal("timeout", "timeout: " + e.message); }
    }
    payload.retry = retryBody();
    payload.idempotent = $("task-idempotent").checked;
    var concurrency = $("task-concurrency").value.trim();
    if (concurrency && !/^\d+$/.test(concurrency)) {
      throw refusal("concurrency", "concurrency: must be a whole number");
    }
    payload.concurrency = concurrency ? Number(concurrency) : null;
    payload.requires = commaList($("task-requires").value);
    limitsInto(payload);
    payload.parameters = parametersBody();
    environmentInto(payload);
    return payload;
  }

  function publishTask(loaded) {
    var project = $("task-project").value.trim();
    var task = $("task-id").value.trim();
    var payload;
    try {
      payload = taskBody();
    } catch (e) {
      showResult("task-result", e);
      return Promise.resolve(null);
    }
    void loaded;
    var button = $("task-publish");
    button.disabled = true;
    return QL.ensureProject(project).then(function () {
      return api("POST", "/projects/" + seg(project) + "/tasks/" + seg(task) + "/revisions",
        payload);
    }).then(function (view) {
      var node = showResult("task-result", null, (view.created ? "Published revision " :
        "Nothing changed: still revision ") + view.revision + " of " + project + "/" + task + ". ");
      node.appendChild(el("a", { href: "/triggers/edit" + query({ project: project,
        task: task }) }, "Add a trigger"));
      node.appendChild(document.createTextNode(" · "));
      node.appendChild(el("a", { href: "/tasks" }, "Tasks"));
      clear($("env-new"));
      $("env-clear").checked = false;
      drawExistingEnv(view.environment);
      history.replaceState(null, "", "/tasks/edit" + query({ project: project, task: task }));
      return view;
    }).catch(function (e) {
      showResult("task-result", e);
      return null;
    }).then(function (view) {
      button.disabled = false;
      return view;
    });
  }

  // --- trigger editor ------------------------------------------------------------------------

  var EVERY = /^every\s+(.+?)(?:\s+from\s+(\S+))?\s*$/;
  var AT = /^at\s+(\S+)\s*$/;

  function scheduleKind(text) {
    var first = text.trim().split(/\s+/)[0];
    return first === "every" ? "interval" : first === "at" ? "once" : "cron";
  }

  function showTriggerKind(kind) {
    $("trigger-kind").value = kind;
    $("trigger-interval-fields").hidden = kind !== "interval";
    $("trigger-once-fields").hidden = kind !== "once";
    // a DST policy is a wall-clock cron trigger's: other kinds follow elapsed time
    $("trigger-dst-gap").parentNode.hidden = kind !== "cron";
    $("trigger-dst-overlap").parentNode.hidden = kind !== "cron";
  }

  /* The schedule text into the kind and its fields. */
  function readSchedule() {
    var text = $("trigger-cron").value.trim();
    var kind = scheduleKind(text);
    var found;
    if (kind === "interval" && (found = EVERY.exec(text))) {
      $("trigger-every").value = found[1];
      $("trigger-anchor").value = found[2] || "";
    } else if (kind === "once" && (found = AT.exec(text))) {
      $("trigger-at").value = found[1];
    }
    showTriggerKind(kind);
  }

  /* The kind's fields into the schedule text. */
  function writeSchedule() {
    var kind = $("trigger-kind").value;
    var field = $("trigger-cron");
    if (kind === "interval") {
      var every = $("trigger-every").value.trim();
      var anchor = $("trigger-anchor").value.trim();
      field.value = every ? "every " + every + (anchor ? " from " + anchor : "") : "";
    } else if (kind === "once") {
      var at = $("trigger-at").value.trim();
      field.value = at ? "at " + at : "";
    } else if (scheduleKind(field.value) !== "cron") {
      field.value = "";
    }
    showTriggerKind(kind);
  }

  function triggerEditorPage() {
    var params = new URLSearchParams(location.search);
    var zones = $("zone-list");
    try {
      if (Intl.supportedValuesOf) {
        Intl.supportedValuesOf("timeZone").forEach(function (zone) {
          zones.appendChild(el("option", { value: zone }));
        });
      }
    } catch (e) { /* no list: the field is free text */ }
    $("trigger-timezone").value = QL.viewerZone;
    QL.projectsInto($("project-list")).catch(function () { return []; });
    var wantedTask = params.get("task");
    var values = {};  // the loaded trigger's parameter values
    var tasks = {};
    var project = $("trigger-project");
    var drawParams = function () {
      var t = tasks[$("trigger-task").value];
      drawTriggerParams(t ? t.parameters || [] : [], values);
    };
    var loadTasks = function () {
      var chosen = project.value.trim();
      var select = $("trigger-task");
      if (!chosen) return Promise.resolve();
      return api("GET", "/projects/" + seg(chosen) + "/tasks").then(function (found) {
        var keep = select.value || wantedTask;
        clear(select);
        tasks = {};
        found.forEach(function (t) {
          tasks[t.task] = t;
          select.appendChild(el("option", { value: t.task }, t.task));
        });
        if (keep && !tasks[keep] && keep === wantedTask) {
          // the loaded trigger's task is not listed (deleted since): it stays the trigger's
          select.appendChild(el("option", { value: keep }, keep + " (not listed)"));
        }
        if (keep) select.value = keep;
        drawParams();
      }).catch(function () { clear(select); });
    };
    var preview = previewer();
    project.addEventListener("change", loadTasks);
    project.addEventListener("input", QL.debounce(400, loadTasks));
    project.addEventListener("input", function () { gate($("trigger-publish"), project); });
    $("trigger-task").addEventListener("change", drawParams);
    $("trigger-cron").addEventListener("input", function () { readSchedule(); preview(); });
    $("trigger-timezone").addEventListener("input", preview);
    $("trigger-kind").addEventListener("change", function () { writeSchedule(); preview(); });
    ["trigger-every", "trigger-anchor", "trigger-at"].forEach(function (id) {
      $(id).addEventListener("input", function () { writeSchedule(); preview(); });
    });
    $("trigger-overlap").addEventListener("change", function () {
      $("trigger-queue-label").hidden = $("trigger-overlap").value !== "queue";
    });
    if (params.get("project")) project.value = params.get("project");
    gate($("trigger-publish"), project);
    showTriggerKind("cron");
    var ready = loadTasks();
    var loaded = null;  // the trigger as loaded
    if (params.get("trigger")) {
      $("trigger-id").value = params.get("trigger");
      // no publishing a half-loaded form: the button waits for the trigger and its task list
      $("trigger-publish").disabled = true;
      api("GET", "/projects/" + seg(params.get("project") || "") + "/triggers/" +
        seg(params.get("trigger"))).then(function (t) {
        wantedTask = t.task;
        loaded = t;
        values = t.parameters || {};
        fillTrigger(t);
        return ready.then(function () {
          $("trigger-task").value = t.task;
          drawParams();
          preview();
        });
      }).catch(function (e) { showResult("trigger-result", e); })
        .then(function () { $("trigger-publish").disabled = false; });
    }
    $("trigger-form").addEventListener("submit", function (event) {
      event.preventDefault();
      publishTrigger(loaded, tasks);
    });
  }

  function fillTrigger(t) {
    $("trigger-cron").value = t.schedule || t.cron || "";
    readSchedule();
    $("trigger-timezone").value = t.timezone;
    $("trigger-misfire").value = t.misfire;
    $("trigger-overlap").value = t.overlap;
    $("trigger-queue-limit").value = String(t.overlap_queue_limit);
    $("trigger-queue-label").hidden = t.overlap !== "queue";
    $("trigger-dst-gap").value = t.dst ? t.dst.gap : "";
    $("trigger-dst-overlap").value = t.dst ? t.dst.overlap : "";
    $("trigger-jitter").value = t.jitter ? String(t.jitter.max_s) : "";
    $("trigger-jitter-random").value = t.jitter ? String(t.jitter.random_s) : "";
    $("trigger-enabled").checked = !!t.enabled;
    $("trigger-flow").value = t.flow || "";
    $("trigger-flow").disabled = true;  // what a trigger starts never changes
  }

  /* One field per parameter of the task (and per value the trigger has for another one). */
  function drawTriggerParams(declared, values) {
    var holder = clear($("trigger-params"));
    var shown = declared.map(function (p) { return { name: p.name, type: p.type,
      default: p.default }; });
    Object.keys(values).sort().forEach(function (name) {
      if (!shown.some(function (p) { return p.name === name; })) {
        var v = values[name];
        shown.push({ name: name, type: typeof v === "number" ? "integer"
          : typeof v === "boolean" ? "boolean" : "string", default: null });
      }
    });
    if (!shown.length) {
      holder.appendChild(el("span", { class: "muted" }, "The task has no parameters."));
      return;
    }
    shown.forEach(function (p, i) {
      var id = "trigger-param-" + i;
      var given = Object.prototype.hasOwnProperty.call(values, p.name);
      holder.appendChild(el("label", { for: id }, p.name + " (" + p.type + ")",
        el("input", { id: id, class: "trigger-param", "data-name": p.name, "data-type": p.type,
          spellcheck: "false", value: given ? String(values[p.name]) : "",
          placeholder: p.default === null ? "" : "(default " + String(p.default) + ")" })));
    });
  }

  /* The live preview: asks the API 300 ms after the last keystroke; late answers to older
     questions are dropped. */
  function previewer() {
    var asked = 0;
    return QL.debounce(300, function () {
      var text = $("trigger-cron").value.trim();
      var zone = $("trigger-timezone").value.trim() || "UTC";
      var state = $("preview-state");
      var tbody = $("preview").tBodies[0];
      var mine = ++asked;
      if (!text) {
        clear(tbody);
        state.className = "muted";
        state.textContent = "Type a schedule.";
        return;
      }
      state.textContent = "Checking…";
      api("GET", "/cron/preview" + query({ schedule: text, timezone: zone, count: 8 }))
        .then(function (view) {
          if (mine !== asked) return;
          state.className = "muted";
          clear(state);
          QL.append(state, ["Next " + view.occurrences.length + " fires of ",
            el("code", {}, view.schedule), " in " + view.timezone + ":"]);
          clear(tbody);
          view.occurrences.forEach(function (o) {
            tbody.appendChild(QL.row([el("td", { class: "num" }, o.n), QL.zoned(o.local),
              QL.local(o.at_ms), QL.utc(o.at_ms),
              o.dst ? o.dst + (o.note ? ": " + o.note : "") : ""]));
          });
        }).catch(function (e) {
          if (mine !== asked) return;
          clear(tbody);
          state.className = "problem";
          state.textContent = describe(e);
        });
    });
  }

  function whole(id, what) {
    var text = $(id).value.trim();
    if (!text) return null;
    if (!/^\d+$/.test(text)) throw refusal(what, what + ": must be a whole number");
    return Number(text);
  }

  /* The body of a publish: every field as the form shows it. Throws a refusal. */
  function triggerBody(loaded) {
    var payload = {
      task: $("trigger-task").value,
      schedule: $("trigger-cron").value.trim(),
      timezone: $("trigger-timezone").value.trim(),
      misfire: $("trigger-misfire").value,
      overlap: $("trigger-overlap").value,
      enabled: $("trigger-enabled").checked
    };
    if (payload.overlap === "queue") {
      payload.overlap_queue_limit = whole("trigger-queue-limit", "overlap queue limit");
      if (payload.overlap_queue_limit === null) payload.overlap_queue_limit = 1;
    }
    if (scheduleKind(payload.schedule) === "cron") {
      if ($("trigger-dst-gap").value) payload.dst_gap = $("trigger-dst-gap").value;
      if ($("trigger-dst-overlap").value) payload.dst_overlap = $("trigger-dst-overlap").value;
    }
    var jitter = whole("trigger-jitter", "jitter");
    var random = whole("trigger-jitter-random", "jitter random part");
    payload.jitter_s = jitter === null ? 0 : jitter;
    if (payload.jitter_s) payload.jitter_random_s = random === null ? 0 : random;
    else if (random) throw refusal("jitter", "jitter: the random part needs a jitter");
    var values = {};
    Array.prototype.forEach.call(document.querySelectorAll("#trigger-params .trigger-param"),
      function (input) {
        if (input.value === "") return;  // the parameter's default
        var name = input.getAttribute("data-name");
        values[name] = typed(input.getAttribute("data-type"), input.value, name);
      });
    payload.parameters = values;
    var flow = $("trigger-flow").value.trim();
    if (flow && !loaded) payload.flow = flow;
    return payload;
  }

  function publishTrigger(loaded) {
    var project = $("trigger-project").value.trim();
    var trigger = $("trigger-id").value.trim();
    if (loaded && (loaded.project !== project || loaded.trigger !== trigger)) loaded = null;
    var payload;
    try {
      payload = triggerBody(loaded);
    } catch (e) {
      showResult("trigger-result", e);
      return;
    }
    var button = $("trigger-publish");
    button.disabled = true;
    api("POST", "/projects/" + seg(project) + "/triggers/" + seg(trigger) + "/revisions",
      payload).then(function (view) {
      var node = showResult("trigger-result", null, (view.created ? "Published revision " :
        "Nothing changed: still revision ") + view.revision + " of " + project + "/" +
        trigger + ". ");
      node.appendChild(el("a", { href: "/triggers/" + seg(project) + "/" + seg(trigger) },
        "Open the trigger"));
    }).catch(function (e) {
      showResult("trigger-result", e);
    }).then(function () { button.disabled = false; });
  }

  QL.pages["task-editor"] = taskEditorPage;
  QL.pages["trigger-editor"] = triggerEditorPage;
})();
