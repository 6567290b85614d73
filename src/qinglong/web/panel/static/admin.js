/* qinglong panel: the administration pages -- users, API tokens, the audit log, the cluster's
 * processes, and notifications (channels, rules, deliveries). Loaded after panel.js; uses its
 * helpers (window.QL) and registers its pages in QL.pages (the notifications page replaces
 * panel.js's).
 *
 * As in panel.js, every value from the API reaches the page as text. A write control exists
 * only for a role that may use it (built when QL.allowed says so, or marked data-needs and
 * hidden by QL.applyRoles); a destructive one asks first, beside the control; when the API
 * refuses, its problem is shown next to the control that asked.
 */
(function () {
  "use strict";

  var QL = window.QL;
  var el = QL.el, $ = QL.$;
  var ROLES = ["none", "viewer", "operator", "admin"]; // on every project (none: grants only)
  var SCOPES = [["read", "read"], ["operate", "operate"], ["admin", "admin"]];
  var STALE_MS = 10000; // a process not seen for this long is stale (dead after 30 s: the API)
  var EVENTS = ["failed", "timed_out", "lost", "cancelled", "misfired", "recovered",
    "unplaceable", "started", "succeeded", "running_long", "late_start"];
  var ACTIONS = ["project", "project.create", "project.archive", "project.unarchive",
    "project.pause", "project.resume", "project.env.set", "project.env.remove", "task",
    "task.publish", "task.enable", "task.disable", "task.delete", "task.label", "trigger",
    "trigger.publish", "trigger.enable", "trigger.disable", "trigger.pause", "trigger.resume",
    "trigger.delete", "trigger.label",
    "trigger.backfill", "run", "run.now", "run.cancel", "notify", "notify.channel.put",
    "notify.channel.remove", "notify.rule.add", "notify.rule.remove", "notify.test",
    "notify.retry", "token", "token.create", "token.revoke", "user", "user.create",
    "user.update", "second-factor", "second-factor.begin", "second-factor.enable",
    "second-factor.disable", "second-factor.reset", "second-factor.reseal"];

  // --- shared pieces ---------------------------------------------------------------------------

  /* The span beside a control where the API's refusal is shown. */
  function problemSpan(key) {
    return el("span", { class: "problem", role: "alert", hidden: true, "data-problem": key });
  }

  /* Ask beside ``control`` before ``action`` (QL.confirmBeside; window.confirm without it). */
  function confirmThen(control, question, yes, action) {
    if (QL.confirmBeside) { QL.confirmBeside(control, question, yes, action); return; }
    if (window.confirm(question)) action();
  }

  /* Run ``request`` (a function returning the API's promise) for ``control``: disabled while
     it runs, the refusal in ``problem``; resolves with the answer, or null when refused. */
  function act(control, problem, request) {
    QL.showProblem(problem, null);
    if (control) control.disabled = true;
    return Promise.resolve().then(request).then(function (answer) {
      return answer === undefined || answer === null ? true : answer; // 204: no body
    }, function (error) {
      QL.showProblem(problem, error);
      return null;
    }).then(function (answer) {
      if (control) control.disabled = false;
      return answer;
    });
  }

  function lines(text) {
    return String(text).split("\n").map(function (l) { return l.trim(); })
      .filter(function (l) { return l; });
  }

  /* NAME=value lines as an object; a line without '=' is refused with its field. */
  function pairs(text, field) {
    var found = {};
    lines(text).forEach(function (l) {
      var at = l.indexOf("=");
      if (at < 1) throw new Error(field + ": '" + l + "' is not NAME=value");
      found[l.slice(0, at).trim()] = l.slice(at + 1).trim();
    });
    return found;
  }

  function optionalDuration(id, field) {
    var text = $(id).value.trim();
    if (!text) return null;
    try { return QL.parseDuration(text); } catch (e) { throw new Error(field + ": " + e.message); }
  }

  function labelled(id, text, control) {
    return [el("label", { for: id, class: "inline-label" }, text), " ", control];
  }

  function byName(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

  /* The projects this user is admin of by a grant (the page's data-grants: "p:role ..."). */
  function adminProjects() {
    return (QL.body.getAttribute("data-grants") || "").split(" ").filter(function (pair) {
      return pair.slice(pair.lastIndexOf(":") + 1) === "admin";
    }).map(function (pair) { return pair.slice(0, pair.lastIndexOf(":")); });
  }

  /* Administration pages a role may not use are left out of its navigation: the audit log
     is for admins; the users page also for a project's admin (its grants). */
  function trimNav() {
    if (QL.allowed("admin")) return;
    var hide = adminProjects().length ? ["/audit"] : ["/users", "/audit"];
    hide.forEach(function (href) {
      var link = document.querySelector('header.top nav a[href="' + href + '"]');
      if (link) link.hidden = true;
    });
  }

  // --- users -------------------------------------------------------------------------------------

  function usersPage() {
    var me = QL.body.getAttribute("data-user");

    function load() {
      return QL.api("GET", "/users").then(function (users) {
        QL.showProblem("problem", null);
        var tbody = QL.clear($("users").tBodies[0]);
        if (!users.length) QL.emptyRow(tbody, 7, "No user yet.");
        users.forEach(function (u) { tbody.appendChild(userRow(u)); });
      }).catch(function (e) { QL.showProblem("problem", e); });
    }

    function done(text) {
      QL.showResult("users-result", null, text);
      return load();
    }

    function patch(username, change) {
      return QL.api("PATCH", "/users/" + QL.seg(username), change);
    }

    /* The user's second factor (off, pending, on) and, for an admin, its reset: after a
       confirmation beside the button, DELETE .../second-factor (they log in with the
       password alone, and enrol again where their role must have one). */
    function secondFactorCell(u, problem) {
      var state = el("span", { "data-second-factor-of": u.username }, u.second_factor);
      if (!problem || u.second_factor === "off") return el("td", {}, state);
      var reset = el("button", { type: "button", class: "danger",
        "data-reset-second-factor": u.username, onclick: function () {
          confirmThen(reset, "Reset " + u.username + "'s second factor? They log in with " +
            "the password alone until they set one up again.", "Reset", function () {
            return act(null, problem, function () {
              return QL.api("DELETE", "/users/" + QL.seg(u.username) + "/second-factor");
            }).then(function (ok) {
              if (ok) done("Reset " + u.username + "'s second factor.");
            });
          });
        } }, "Reset second factor");
      return el("td", {}, state, " ", reset);
    }

    function userRow(u) {
      if (!QL.allowed("admin")) {
        return QL.row([el("span", { class: "mono" }, u.username), u.role,
          QL.badge(u.disabled ? "disabled" : "active"), secondFactorCell(u, null),
          QL.when(u.created_at), QL.when(u.updated_at), ""], { "data-user": u.username });
      }
      var problem = problemSpan(u.username);
      var select = el("select", { id: "role-" + u.username, "data-role-of": u.username },
        ROLES.map(function (r) { return el("option", { value: r, selected: r === u.role }, r); }));
      var setRole = el("button", { type: "button", "data-set-role": u.username,
        onclick: function () {
          var role = select.value;
          act(setRole, problem, function () { return patch(u.username, { role: role }); })
            .then(function (ok) { if (ok) done(u.username + " is now " + role + "."); });
        } }, "Change role");
      var toggle = el("button", { type: "button", class: u.disabled ? null : "danger",
        "data-toggle": u.username, onclick: function () {
          if (u.disabled) {
            act(toggle, problem, function () { return patch(u.username, { disabled: false }); })
              .then(function (ok) { if (ok) done("Enabled " + u.username + "."); });
            return;
          }
          confirmThen(toggle, "Disable " + u.username + "? Their sessions end and their " +
            "tokens are revoked.", "Disable", function () {
            return act(null, problem, function () {
              return patch(u.username, { disabled: true });
            }).then(function (ok) { if (ok) done("Disabled " + u.username + "."); });
          });
        } }, u.disabled ? "Enable" : "Disable");
      var form = passwordForm(u.username, problem);
      var open = el("button", { type: "button", "data-password": u.username,
        "aria-expanded": "false", "aria-controls": form.id, onclick: function () {
          form.hidden = !form.hidden;
          open.setAttribute("aria-expanded", form.hidden ? "false" : "true");
          if (!form.hidden) form.querySelector("input").focus();
        } }, "Set password");
      var roleCell = el("td", {}, labelled(select.id, "Role of " + u.username, select), " ",
        setRole);
      var actions = el("td", {}, toggle, " ", open, form, " ", problem);
      return QL.row([el("span", { class: "mono" }, u.username), roleCell,
        QL.badge(u.disabled ? "disabled" : "active"), secondFactorCell(u, problem),
        QL.when(u.created_at), QL.when(u.updated_at), actions],
        { "data-user": u.username, "data-me": u.username === me ? "true" : null });
    }

    function passwordForm(username, problem) {
      var first = el("input", { type: "password", id: "pw-" + username, required: true,
        autocomplete: "new-password" });
      var second = el("input", { type: "password", id: "pw2-" + username, required: true,
        autocomplete: "new-password" });
      var save = el("button", { type: "submit", "data-save-password": username }, "Save");
      var form = el("form", { id: "password-" + username, class: "inline", hidden: true,
        autocomplete: "off" }, labelled(first.id, "New password for " + username, first),
        labelled(second.id, "Again", second), save);
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        if (first.value !== second.value) {
          QL.showProblem(problem, new Error("The two passwords differ: type the same one twice."));
          return;
        }
        act(save, problem, function () {
          return patch(username, { password: first.value });
        }).then(function (ok) {
          first.value = "";
          second.value = "";
          if (ok) done("Set a new password for " + username + ": their sessions ended and " +
            "their tokens were revoked.");
        });
      });
      return form;
    }

    grantsSection();
    $("user-create").addEventListener("submit", function (event) {
      event.preventDefault();
      var problem = $("user-create-problem");
      var name = $("user-name").value.trim();
      var password = $("user-password").value;
      if (password !== $("user-password2").value) {
        QL.showProblem(problem, new Error("The two passwords differ: type the same one twice."));
        return;
      }
      act($("user-create-submit"), problem, function () {
        return QL.api("POST", "/users", { username: name, role: $("user-role").value,
          password: password });
      }).then(function (user) {
        $("user-password").value = "";
        $("user-password2").value = "";
        if (user) {
          $("user-name").value = "";
          done("Added " + user.username + " (" + user.role + ").");
        }
      });
    });
    load();
  }

  /* Roles on one project: the grants of the project chosen; a project's admin adds and
     removes them. */
  function grantsSection() {
    var select = $("grants-project");

    function load() {
      var project = select.value;
      var mayChange = !!project && QL.allowed("admin", project);
      $("grant-add").hidden = !mayChange;
      if (!project) return Promise.resolve();
      return QL.api("GET", "/projects/" + QL.seg(project) + "/grants").then(function (grants) {
        if (select.value !== project) return; // another project was chosen meanwhile
        var tbody = QL.clear($("grants").tBodies[0]);
        if (!grants.length) QL.emptyRow(tbody, 5, "No grant on " + project + ".");
        grants.forEach(function (g) { tbody.appendChild(grantRow(g, project, mayChange)); });
      }).catch(function (e) { QL.showResult("grants-result", e); });
    }

    function grantRow(g, project, mayChange) {
      var cells = [el("span", { class: "mono" }, g.username), g.role, g.granted_by,
        QL.when(g.granted_at)];
      if (!mayChange) return QL.row(cells.concat([""]), { "data-grant": g.username });
      var problem = problemSpan("grant-" + g.username);
      var remove = el("button", { type: "button", class: "danger", "data-revoke-grant": g.username,
        onclick: function () {
          confirmThen(remove, "Take " + g.username + "'s role (" + g.role + ") on " + project +
            " back?", "Take back", function () {
            return act(null, problem, function () {
              return QL.api("DELETE", "/projects/" + QL.seg(project) + "/grants/" +
                QL.seg(g.username));
            }).then(function (ok) {
              if (!ok) return null;
              QL.showResult("grants-result", null, g.username + " has no role of their own on " +
                project + " now.");
              return load();
            });
          });
        } }, "Take back");
      return QL.row(cells.concat([el("td", {}, remove, " ", problem)]),
        { "data-grant": g.username });
    }

    $("grant-add").addEventListener("submit", function (event) {
      event.preventDefault();
      var project = select.value;
      var username = $("grant-user").value.trim();
      var role = $("grant-role").value;
      act($("grant-add-submit"), $("grant-add-problem"), function () {
        return QL.api("PUT", "/projects/" + QL.seg(project) + "/grants/" + QL.seg(username),
          { role: role });
      }).then(function (granted) {
        if (!granted) return null;
        $("grant-user").value = "";
        QL.showResult("grants-result", null, username + " is " + granted.role + " on " +
          project + ".");
        return load();
      });
    });
    if (QL.allowed("admin")) {
      QL.api("GET", "/users").then(function (users) {
        users.forEach(function (u) { $("grant-users").appendChild(el("option", { value: u.username })); });
      }).catch(function () { return null; });
    }
    QL.projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { select.appendChild(el("option", { value: p.id }, p.id)); });
      var mine = adminProjects();
      if (mine.length && !QL.allowed("admin")) select.value = mine[0];
      select.addEventListener("change", load);
      load();
    }).catch(function (e) { QL.showResult("grants-result", e); });
  }

  // --- API tokens --------------------------------------------------------------------------------

  function tokensPage() {
    var me = QL.body.getAttribute("data-user");
    var scope = $("token-scope");
    SCOPES.forEach(function (s) {
      if (QL.allowed(s[0])) scope.appendChild(el("option", { value: s[0] }, s[1]));
    });
    if (QL.allowed("admin")) {
      QL.api("GET", "/users").then(function (users) {
        users.forEach(function (u) {
          $("token-users").appendChild(el("option", { value: u.username }));
        });
      }).catch(function () { return null; });
    }

    function load() {
      var all = $("token-all").checked && QL.allowed("admin");
      return QL.api("GET", "/tokens" + QL.query({ all: all ? "true" : "" })).then(function (tokens) {
        QL.showProblem("problem", null);
        var tbody = QL.clear($("tokens").tBodies[0]);
        if (!tokens.length) QL.emptyRow(tbody, 10, "No token yet.");
        tokens.forEach(function (t) { tbody.appendChild(tokenRow(t)); });
      }).catch(function (e) { QL.showProblem("problem", e); });
    }

    function tokenRow(t) {
      var cells = [el("span", { class: "mono" }, t.id), t.name, t.username, t.scope,
        el("span", { title: t.revoked_by ? "revoked by " + t.revoked_by : null },
          QL.badge(t.state)), t.projects ? t.projects.join(", ") : "every project",
        QL.when(t.created_at), t.expires_at ? QL.when(t.expires_at) : "never",
        t.last_used_at ? QL.when(t.last_used_at) : "never"];
      var mayRevoke = t.state === "active" && (t.username === me || QL.allowed("admin"));
      if (!mayRevoke) return QL.row(cells.concat([""]), { "data-token": t.id });
      var problem = problemSpan(t.id);
      var revoke = el("button", { type: "button", class: "danger", "data-revoke": t.id,
        onclick: function () {
          confirmThen(revoke, "Revoke " + t.name + " (" + t.id + ", " + t.username + ")? " +
            "Whatever uses it is refused from now on.", "Revoke", function () {
            return act(null, problem, function () {
              return QL.api("DELETE", "/tokens/" + QL.seg(t.id));
            }).then(function (view) {
              if (!view) return null;
              QL.showResult("tokens-result", null, "Revoked " + view.name + " (" + view.id + ").");
              return load();
            });
          });
        } }, "Revoke");
      return QL.row(cells.concat([el("td", {}, revoke, " ", problem)]), { "data-token": t.id });
    }

    $("token-create").addEventListener("submit", function (event) {
      event.preventDefault();
      var problem = $("token-create-problem");
      var body = { name: $("token-name").value.trim(), scope: scope.value };
      var owner = QL.allowed("admin") ? $("token-owner").value.trim() : "";
      if (owner) body.username = owner;
      var projects = $("token-projects").value.split(",").map(function (p) { return p.trim(); })
        .filter(function (p) { return p; });
      if (projects.length) body.projects = projects;
      try {
        var lifetime = optionalDuration("token-expires", "Expires in");
        if (lifetime !== null) body.expires_in_ms = lifetime;
      } catch (e) { QL.showProblem(problem, e); return; }
      $("token-secret").hidden = true;
      $("token-secret-value").value = "";
      act($("token-create-submit"), problem, function () {
        return QL.api("POST", "/tokens", body);
      }).then(function (made) {
        if (!made) return null;
        $("token-name").value = "";
        $("token-secret-value").value = made.token;
        QL.clear($("token-copy-result"));
        $("token-secret").hidden = false;
        $("token-secret-value").focus();
        $("token-secret-value").select();
        QL.showResult("tokens-result", null, "Created " + made.name + " (" + made.id + ", scope " +
          made.scope + (made.projects ? ", only " + made.projects.join(", ") : "") +
          (made.expires_at ? ", expires " + QL.local(made.expires_at) : "") + ").");
        return load();
      });
    });

    $("token-copy").addEventListener("click", function () {
      var field = $("token-secret-value");
      var said = $("token-copy-result");
      function fallback() {
        field.focus();
        field.select();
        var copied = false;
        try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
        said.textContent = copied ? "Copied." : "Selected: copy it with Ctrl+C.";
      }
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(field.value).then(function () {
          said.textContent = "Copied.";
        }, fallback);
      } else fallback();
    });
    $("token-all").addEventListener("change", load);
    load();
  }

  // --- the audit log -----------------------------------------------------------------------------

  function auditPage() {
    var FIELDS = ["actor", "action", "project", "since", "until", "limit"];
    var stack = []; // the cursors of the newer pages, to go back
    var shown = { cursor: null, next: null };
    var asked = 0; // only the answer to the latest request is drawn

    /* An instant as a datetime-local value in the browser's zone (its milliseconds kept when
       it has some: a range from a link stays exact). */
    function localInput(ms) {
      var d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
      return d.toISOString().slice(0, ms % 1000 ? 23 : 19);
    }

    function filters() {
      var got = { limit: $("audit-limit").value };
      ["actor", "action", "project"].forEach(function (name) {
        var v = $("audit-" + name).value.trim();
        if (v) got[name] = v;
      });
      ["since", "until"].forEach(function (name) {
        var v = $("audit-" + name).value;
        if (!v) return;
        var ms = new Date(v).getTime(); // datetime-local: the browser's zone
        if (isNaN(ms)) throw new Error(name + ": not a time");
        got[name] = ms;
      });
      return got;
    }

    function fromLocation() {
      var params = new URLSearchParams(location.search);
      FIELDS.forEach(function (name) {
        var v = params.get(name);
        if (v === null) return;
        if (name === "since" || name === "until") {
          if (/^\d{1,15}$/.test(v)) $("audit-" + name).value = localInput(Number(v));
        } else $("audit-" + name).value = v;
      });
    }

    function load(cursor) {
      var problem = $("audit-problem");
      var given;
      try { given = filters(); } catch (e) { QL.showProblem(problem, e); return Promise.resolve(); }
      var params = {};
      FIELDS.forEach(function (n) { if (given[n] !== undefined) params[n] = given[n]; });
      history.replaceState(null, "", location.pathname + QL.query(params));
      if (cursor) params.cursor = cursor;
      var mine = ++asked;
      return QL.api("GET", "/audit" + QL.query(params)).then(function (page) {
        if (mine !== asked) return;
        QL.showProblem(problem, null);
        QL.showProblem("problem", null);
        shown = { cursor: cursor, next: page.next_cursor };
        draw(page.items);
        $("audit-older").disabled = !page.next_cursor;
        $("audit-newer").disabled = !stack.length;
        $("audit-page").textContent = "Page " + (stack.length + 1);
      }).catch(function (e) {
        if (mine === asked) QL.showProblem(e.status === 403 ? "problem" : problem, e);
      });
    }

    function draw(items) {
      var tbody = QL.clear($("audit").tBodies[0]);
      if (!items.length) QL.emptyRow(tbody, 8, "No entry matches.");
      items.forEach(function (e) {
        var detail = Object.keys(e.detail || {}).length ? JSON.stringify(e.detail) : "—";
        tbody.appendChild(QL.row([QL.when(e.at), e.actor,
          e.via + (e.token_id ? " " + e.token_id : ""), el("span", { class: "mono" }, e.action),
          e.project || "—", e.target || "—", el("span", { class: "mono" }, detail),
          e.client || "—"], { "data-entry": e.id }));
      });
    }

    function fresh() { stack = []; return load(null); }

    $("audit-filter").addEventListener("submit", function (event) {
      event.preventDefault();
      fresh();
    });
    $("audit-clear").addEventListener("click", function () {
      ["actor", "action", "project", "since", "until"].forEach(function (name) {
        $("audit-" + name).value = "";
      });
      fresh();
    });
    $("audit-older").addEventListener("click", function () {
      if (!shown.next) return;
      stack.push(shown.cursor);
      load(shown.next);
    });
    $("audit-newer").addEventListener("click", function () {
      if (!stack.length) return;
      load(stack.pop());
    });
    ACTIONS.forEach(function (a) { $("audit-actions").appendChild(el("option", { value: a })); });
    if (QL.allowed("admin")) {
      QL.api("GET", "/users").then(function (users) {
        users.forEach(function (u) {
          $("audit-users").appendChild(el("option", { value: u.username }));
        });
      }).catch(function () { return null; });
      QL.projectsInto($("audit-projects")).catch(function () { return null; });
    }
    fromLocation();
    fresh();
  }

  // --- the cluster -------------------------------------------------------------------------------

  /* alive: seen lately; stale: registered alive, not seen for STALE_MS by the server's clock;
     dead: not seen within the API's window and never said it stopped; stopped: said so. */
  function processState(p, nowMs) {
    if (p.stopped_at) return "stopped";
    if (!p.alive) return "dead";
    return nowMs - QL.toMs(p.seen_at) > STALE_MS ? "stale" : "alive";
  }

  var STATE_ORDER = { alive: 0, stale: 1, dead: 2, stopped: 3 };

  /* The global limit (GET and PUT /api/v1/limits): shown to all, changed by an admin. A
     new value is checked by the API (1 to the concurrency maximum); removing it asks first. */
  function drawLimit(view) {
    $("limit-global").textContent = view.global === null ? "any number of" : String(view.global);
    $("limit-global").setAttribute("data-limit", view.global === null ? "" : String(view.global));
  }

  function setLimit(value, control) {
    control.disabled = true;
    return QL.api("PUT", "/limits", { global: value }).then(function (view) {
      drawLimit(view);
      QL.showResult("limit-result", null, view.global === null ? "The global limit is removed."
        : "The global limit is " + view.global + ".");
    }).catch(function (e) { QL.showResult("limit-result", e); })
      .then(function () { control.disabled = false; });
  }

  function limitControls() {
    $("limit-form").addEventListener("submit", function (event) {
      event.preventDefault();
      var text = $("limit-value").value.trim();
      var value = Number(text);
      if (!text || !Number.isInteger(value)) {
        QL.showResult("limit-result", new Error("Give a whole number of Runs (1 or more)."));
        return;
      }
      setLimit(value, $("limit-set"));
    });
    $("limit-clear").addEventListener("click", function (event) {
      var control = event.currentTarget;
      confirmThen(control, "Remove the global limit?", "Remove", function () {
        return setLimit(null, control);
      });
    });
  }

  function clusterPage() {
    limitControls();
    QL.api("GET", "/limits").then(drawLimit)
      .catch(function (e) { QL.showResult("limit-result", e); });
    QL.every(5000, function () {
      return Promise.all([QL.api("GET", "/health"), QL.api("GET", "/queue")]).then(function (got) {
        QL.showProblem("problem", null);
        drawCluster(got[0]);
        drawClusterQueue(got[1]);
        $("cluster-updated").textContent = QL.local(Date.now());
      }).catch(function (e) { QL.showProblem("problem", e); });
    });
  }

  function drawCluster(health) {
    var now = QL.toMs(health.time);
    var items = health.instances.map(function (p) {
      return { p: p, state: processState(p, now) };
    }).sort(function (a, b) {
      return STATE_ORDER[a.state] - STATE_ORDER[b.state] || byName(a.p.role, b.p.role) ||
        byName(a.p.id, b.p.id);
    });
    var counts = { alive: 0, stale: 0, dead: 0, stopped: 0 };
    items.forEach(function (i) { counts[i.state] += 1; });
    var words = ["alive", "stale", "dead", "stopped"].filter(function (s) { return counts[s]; })
      .map(function (s) { return counts[s] + " " + s; });
    $("cluster-summary").textContent = "Profile " + health.profile + ", version " +
      health.version + ", server time " + QL.local(health.time) + ". Processes: " +
      (words.length ? words.join(", ") : "none registered") + ".";
    var tbody = QL.clear($("cluster").tBodies[0]);
    if (!items.length) {
      QL.emptyRow(tbody, 8, "No registered processes (a standalone `ql serve` registers none).");
      return;
    }
    items.forEach(function (i) {
      var p = i.p;
      var since = now - QL.toMs(p.seen_at);
      var state = el("span", { title: "last seen " + QL.duration(Math.max(0, since)) +
        " before the server's time" }, QL.badge(i.state));
      tbody.appendChild(QL.row([p.role, el("span", { class: "mono" }, p.id), p.host,
        el("td", { class: "num" }, p.pid), QL.labelsText(p.labels), QL.when(p.started_at),
        QL.when(p.seen_at), state], { "data-instance": p.id, "data-state": i.state }));
    });
  }

  function drawClusterQueue(q) {
    $("cluster-queue-summary").textContent = q.queued + " queued" +
      (q.oldest_age_ms === null ? "." : ", the oldest for " + QL.duration(q.oldest_age_ms) +
        ".") + (q.unplaceable ? " " + q.unplaceable + " wait for labels no live worker " +
        "offers." : "");
    var tbody = QL.clear($("cluster-queue").tBodies[0]);
    if (!q.requirements.length) {
      QL.emptyRow(tbody, 4, "No queued Run requires worker labels.");
      return;
    }
    q.requirements.forEach(function (g) {
      tbody.appendChild(QL.row([g.requires.join(", "), el("td", { class: "num" }, g.queued),
        QL.duration(g.oldest_age_ms), g.unplaceable ? QL.badge("no") : "yes"],
        { "data-requires": g.requires.join(",") }));
    });
  }

  // --- notifications -----------------------------------------------------------------------------

  function channelKind(c) {
    return c.kind + (c.service ? ":" + c.service.service :
      (c.template && c.template.preset ? ":" + c.template.preset : ""));
  }

  function notificationsPage() {
    var channels = [];
    var project = $("rules-project");

    function loadChannels() {
      return QL.api("GET", "/notify/channels").then(function (found) {
        QL.showProblem("problem", null);
        channels = found;
        drawChannels();
        var select = QL.clear($("rule-channel"));
        channels.forEach(function (c) { select.appendChild(el("option", { value: c.name }, c.name)); });
      }).catch(function (e) { QL.showProblem("problem", e); });
    }

    function drawChannels() {
      var tbody = QL.clear($("notify-channels").tBodies[0]);
      if (!channels.length) QL.emptyRow(tbody, 6, "No channel yet.");
      channels.forEach(function (c) {
        var problem = problemSpan(c.name);
        var test = el("button", { type: "button", "data-needs": "operate", "data-channel": c.name,
          onclick: function () { testChannel(test, c.name, problem); } }, "Send test");
        var remove = el("button", { type: "button", class: "danger", "data-needs": "admin",
          "data-delete-channel": c.name, onclick: function () {
            var rules = (c.rules || []).length;
            confirmThen(remove, "Delete the channel " + c.name + (rules ? " and its " + rules +
              " rule" + (rules === 1 ? "" : "s") : "") + "? Its secret is erased and " +
              "deliveries waiting for it are not sent.", "Delete", function () {
              return act(null, problem, function () {
                return QL.api("DELETE", "/notify/channels/" + QL.seg(c.name));
              }).then(function (gone) {
                if (!gone) return null;
                QL.showResult("notify-result", null, "Deleted the channel " + c.name + ".");
                return Promise.all([loadChannels(), loadRules()]);
              });
            });
          } }, "Delete");
        tbody.appendChild(QL.row([el("span", { class: "mono" }, c.name), channelKind(c),
          el("span", { class: "mono" }, c.target), c.secret,
          el("td", { class: "num" }, (c.rules || []).length),
          el("td", {}, test, " ", remove, " ", problem)], { "data-channel-row": c.name }));
      });
      QL.applyRoles(tbody);
    }

    /* POST .../test sends notify.test now; the answer says what the receiver said. */
    function testChannel(button, name, problem) {
      var result = $("notify-test-result");
      QL.showResult("notify-test-result", null, "Sending a test notification to " + name + "…");
      result.removeAttribute("data-delivered");
      act(button, problem, function () {
        return QL.api("POST", "/notify/channels/" + QL.seg(name) + "/test", {});
      }).then(function (sent) {
        if (!sent) { QL.clear(result); return; }
        var said = sent.detail + " (" + sent.elapsed_ms + " ms)";
        QL.clear(result).appendChild(el("span", { class: sent.delivered ? "ok-note" : "problem" },
          (sent.delivered ? "Delivered to " : "Not delivered to ") + name + ": " + said));
        result.setAttribute("data-delivered", sent.delivered ? "true" : "false");
        return loadDeliveries();
      });
    }

    function showKindFields() {
      var kind = $("ch-kind").value;
      var preset = $("ch-preset").value;
      var nodes = $("channel-add").querySelectorAll("[data-kinds]");
      for (var i = 0; i < nodes.length; i++) {
        var kinds = nodes[i].getAttribute("data-kinds").split(" ");
        var hide = kinds.indexOf(kind) < 0;
        // a preset stands for the URL, method, body and headers of a template channel
        if (kind === "template" && preset && ["ch-url", "ch-method", "ch-content-type",
          "ch-body", "ch-headers"].indexOf(nodes[i].getAttribute("for")) >= 0) hide = true;
        nodes[i].hidden = hide;
      }
    }

    function value(id) { return $(id).value.trim(); }

    function channelBody() {
      var kind = $("ch-kind").value;
      var body = { name: value("ch-name"), kind: kind };
      var preset = kind === "template" ? $("ch-preset").value : "";
      if (kind === "webhook" || (kind === "template" && !preset)) {
        if (value("ch-url")) body.url = value("ch-url");
        if (lines($("ch-headers").value).length) body.headers = lines($("ch-headers").value);
      }
      if (kind === "template") {
        if (preset) body.preset = preset;
        else {
          body.method = $("ch-method").value;
          if (value("ch-content-type")) body.content_type = value("ch-content-type");
          if (value("ch-body")) {
            try { body.body_template = JSON.parse(value("ch-body")); } catch (e) {
              throw new Error("body_template: not JSON (" + e.message + ")");
            }
          }
        }
      }
      if (kind === "template" || kind === "service") {
        var params = pairs($("ch-params").value, "params");
        if (Object.keys(params).length) body.params = params;
      }
      if (kind === "service") body.service = $("ch-service").value;
      if (kind === "email") {
        if (value("ch-smtp-host")) body.smtp_host = value("ch-smtp-host");
        if (value("ch-smtp-port")) {
          if (!/^\d{1,5}$/.test(value("ch-smtp-port"))) throw new Error("smtp_port: a number");
          body.smtp_port = Number(value("ch-smtp-port"));
        }
        body.smtp_security = $("ch-smtp-security").value;
        if (value("ch-smtp-user")) body.smtp_user = value("ch-smtp-user");
        if (value("ch-from")) body.from = value("ch-from");
        body.to = value("ch-to").split(",").map(function (t) { return t.trim(); })
          .filter(function (t) { return t; });
      }
      if ($("ch-secret").value) body.secret = $("ch-secret").value;
      var timeout = optionalDuration("ch-timeout", "timeout_ms");
      if (timeout !== null) body.timeout_ms = timeout;
      if (value("ch-attempts")) {
        if (!/^\d{1,3}$/.test(value("ch-attempts"))) throw new Error("max_attempts: a number");
        body.max_attempts = Number(value("ch-attempts"));
      }
      return body;
    }

    $("channel-add").addEventListener("submit", function (event) {
      event.preventDefault();
      var problem = $("channel-add-problem");
      var body;
      try { body = channelBody(); } catch (e) { QL.showProblem(problem, e); return; }
      act($("channel-add-submit"), problem, function () {
        return QL.api("POST", "/notify/channels", body);
      }).then(function (made) {
        $("ch-secret").value = ""; // a secret is sent once, never kept on the page
        if (!made) return null;
        $("ch-name").value = "";
        QL.showResult("notify-result", null, "Added the channel " + made.name + ".");
        return loadChannels();
      });
    });
    $("ch-kind").addEventListener("change", showKindFields);
    $("ch-preset").addEventListener("change", showKindFields);
    showKindFields();

    // rules, by project

    function loadRules() {
      var chosen = project.value;
      // the notification routes reach every project (a rule names its project in the body):
      // they need an admin of every project, as the API checks
      $("rule-add").hidden = !chosen || !QL.allowed("admin");
      if (!chosen) return Promise.resolve();
      return QL.api("GET", "/notify/rules" + QL.query({ project: chosen })).then(function (rules) {
        if (project.value !== chosen) return; // another project was chosen meanwhile
        var tbody = QL.clear($("notify-rules").tBodies[0]);
        if (!rules.length) QL.emptyRow(tbody, 6, "No rule for " + chosen + ".");
        rules.forEach(function (r) { tbody.appendChild(ruleRow(r, chosen)); });
      }).catch(function (e) { QL.showProblem("problem", e); });
    }

    function ruleRow(r, chosen) {
      var delays = [["unplaceable", r.unplaceable_after_ms], ["running long", r.running_long_after_ms],
        ["late start", r.late_start_after_ms]].filter(function (d) { return d[1] !== null &&
        d[1] !== undefined; }).map(function (d) { return d[0] + " " + QL.durationText(d[1]); });
      var key = r.channel + "/" + (r.task || "*");
      var cells = [el("span", { class: "mono" }, r.channel), r.task || "(every task)",
        r.events.join(", "), delays.join(", ") || "—", QL.when(r.created_at)];
      if (!QL.allowed("admin")) return QL.row(cells.concat([""]), { "data-rule": key });
      var problem = problemSpan(key);
      var remove = el("button", { type: "button", class: "danger", "data-remove-rule": key,
        onclick: function () {
          confirmThen(remove, "Stop telling " + r.channel + " about " + (r.task ? "the task " +
            r.task : "every task") + " of " + chosen + "?", "Remove", function () {
            var body = { channel: r.channel, project: chosen };
            if (r.task) body.task = r.task;
            return act(null, problem, function () {
              return QL.api("POST", "/notify/rules/remove", body);
            }).then(function (gone) {
              if (!gone) return null;
              QL.showResult("notify-result", null, "Removed the rule (" + gone.removed +
                " event" + (gone.removed === 1 ? "" : "s") + ").");
              return Promise.all([loadRules(), loadChannels()]);
            });
          });
        } }, "Remove");
      return QL.row(cells.concat([el("td", {}, remove, " ", problem)]), { "data-rule": key });
    }

    EVENTS.forEach(function (name) {
      var id = "rule-event-" + name;
      $("rule-events").appendChild(el("label", { for: id, class: "check" },
        el("input", { type: "checkbox", id: id, value: name }), " " + name.replace(/_/g, " ")));
    });

    $("rule-add").addEventListener("submit", function (event) {
      event.preventDefault();
      var problem = $("rule-add-problem");
      var body = { channel: $("rule-channel").value, project: project.value };
      if (value("rule-task")) body.task = value("rule-task");
      var events = EVENTS.filter(function (n) { return $("rule-event-" + n).checked; });
      if (events.length) body.events = events;
      try {
        [["rule-unplaceable", "unplaceable_after_ms"], ["rule-running-long",
          "running_long_after_ms"], ["rule-late-start", "late_start_after_ms"]].forEach(
          function (d) {
            var ms = optionalDuration(d[0], d[1]);
            if (ms !== null) body[d[1]] = ms;
          });
      } catch (e) { QL.showProblem(problem, e); return; }
      act($("rule-add-submit"), problem, function () {
        return QL.api("POST", "/notify/rules", body);
      }).then(function (added) {
        if (!added) return null;
        QL.showResult("notify-result", null, "Added a rule: " + body.channel + " hears of " +
          (body.task ? "the task " + body.task : "every task") + " of " + body.project + ".");
        return Promise.all([loadRules(), loadChannels()]);
      });
    });

    // deliveries

    function loadDeliveries() {
      var status = $("deliveries-status").value;
      return QL.api("GET", "/notify/deliveries" + QL.query({ status: status, limit: 50 }))
        .then(function (items) {
          if ($("deliveries-status").value !== status) return;
          var tbody = QL.clear($("notify-deliveries").tBodies[0]);
          if (!items.length) QL.emptyRow(tbody, 10, "No delivery" + (status ? " " + status : "") +
            ".");
          items.forEach(function (d) { tbody.appendChild(deliveryRow(d)); });
          QL.applyRoles(tbody);
        }).catch(function (e) { QL.showProblem("problem", e); });
    }

    function deliveryRow(d) {
      var cells = [el("span", { class: "mono", title: d.id }, QL.shortId(d.id)), d.channel,
        d.event, QL.badge(d.status), d.attempts + " / " + d.max_attempts,
        d.next_attempt_at ? QL.when(d.next_attempt_at) : "—", d.last_error || "—",
        d.project + (d.task ? " / " + d.task : ""), QL.when(d.occurred_at)];
      if (d.status !== "dead") return QL.row(cells.concat([""]), { "data-delivery": d.id });
      var problem = problemSpan(d.id);
      var retry = el("button", { type: "button", "data-needs": "operate", "data-retry": d.id,
        onclick: function () {
          act(retry, problem, function () {
            return QL.api("POST", "/notify/deliveries/" + QL.seg(d.id) + "/retry", {});
          }).then(function (again) {
            if (!again) return null;
            QL.showResult("notify-result", null, "Sending the delivery " + QL.shortId(d.id) +
              " again (now " + again.status + ").");
            return loadDeliveries();
          });
        } }, "Retry");
      return QL.row(cells.concat([el("td", {}, retry, " ", problem)]), { "data-delivery": d.id });
    }

    $("deliveries-status").addEventListener("change", loadDeliveries);
    $("deliveries-refresh").addEventListener("click", loadDeliveries);
    project.addEventListener("change", loadRules);
    loadChannels();
    loadDeliveries();
    QL.projectsInto(null).then(function (projects) {
      projects.forEach(function (p) { project.appendChild(el("option", { value: p.id }, p.id)); });
      loadRules();
    }).catch(function (e) { QL.showProblem("problem", e); });
  }

  trimNav();
  QL.pages.users = usersPage;
  QL.pages.tokens = tokensPage;
  QL.pages.audit = auditPage;
  QL.pages.cluster = clusterPage;
  QL.pages.notifications = notificationsPage;
})();
