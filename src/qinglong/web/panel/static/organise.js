/* qinglong panel: labels, pins and saved filters (issue 23, item 1), added to the pages other
 * scripts draw: the tasks page, the dashboard, a trigger's page and the Runs page.
 *
 * Loaded right after panel.js and before the page scripts, it wraps QL.api (which they take
 * when they load): a listing of tasks or triggers it sees answered tells it each one's labels
 * and whether the user pinned it (it asks the listing for both: ?pins=true), and a label filter
 * chosen here is added to the listings the page asks for (GET .../tasks, GET
 * /triggers/summary: the API filters in the database). After the page draws a table, its rows
 * get their labels as chips, a Pin/Unpin button and, for an operator of the row's project
 * only, a Labels control that edits them; pinned rows are moved first. Saved filters (the
 * user's, GET /api/v1/me/filters) are read only when their control is opened, so a page asks
 * nothing more until then.
 *
 * Hand-written, no framework, no build step: every value reaches the page as text (QL.el).
 */
(function () {
  "use strict";

  var QL = window.QL;
  var $ = QL.$, el = QL.el, clear = QL.clear, seg = QL.seg, query = QL.query;
  var describe = QL.describe, allowed = QL.allowed;
  var plainApi = QL.api;
  var LABEL = /^[a-z0-9][a-z0-9._:\/-]{0,47}$/;

  var known = {};  // "task demo/job" -> the listing's view of it (labels, pinned)
  var filter = { label: "" };  // the page's label filter
  var onTrigger = null;  // a trigger's page: drawn again when its trigger is read

  // --- what the listings say ----------------------------------------------------------------

  var LISTINGS = [
    { pattern: /^\/projects\/[^\/?]+\/tasks(\?|$)/, kind: "task", filtered: true },
    { pattern: /^\/triggers\/summary(\?|$)/, kind: "trigger", filtered: true },
    { pattern: /^\/triggers(\?|$)/, kind: "trigger", filtered: false },
    { pattern: /^\/projects\/[^\/?]+\/triggers(\?|$)/, kind: "trigger", filtered: false },
    { pattern: /^\/projects\/[^\/?]+\/triggers\/[^\/?]+(\?|$)/, kind: "trigger", one: true }
  ];

  function keyOf(kind, project, id) { return kind + " " + project + "/" + id; }

  function remember(kind, answer) {
    var items = Array.isArray(answer) ? answer : (answer && answer.items) || [answer];
    items.forEach(function (v) {
      if (!v || !v.project || !v[kind]) return;
      known[keyOf(kind, v.project, v[kind])] = {
        kind: kind, project: v.project, id: v[kind],
        labels: Array.isArray(v.labels) ? v.labels : [], pinned: v.pinned === true
      };
    });
  }

  QL.api = function (method, path, data, headers) {
    var seen = null;
    if (method === "GET") {
      for (var i = 0; i < LISTINGS.length; i++) {
        if (LISTINGS[i].pattern.test(path)) { seen = LISTINGS[i]; break; }
      }
      if (seen) path += (path.indexOf("?") < 0 ? "?" : "&") + "pins=true";
      if (seen && seen.filtered && filter.label) {
        path += "&label=" + encodeURIComponent(filter.label);
      }
    }
    return plainApi(method, path, data, headers).then(function (answer) {
      if (seen) {
        remember(seen.kind, answer);
        if (seen.one && onTrigger) onTrigger();
      }
      return answer;
    });
  };

  // --- chips, pins and the labels editor -----------------------------------------------------

  function chips(labels) {
    return el("span", { class: "chips" }, labels.map(function (label) {
      return el("span", { class: "chip", "data-label": label }, label);
    }));
  }

  function pinPath(item) {
    return "/me/pins/" + seg(item.project) + "/" + item.kind + "s/" + seg(item.id);
  }

  var editors = 0;
  var editing = {};  // the open labels editors, kept (with what is typed) across redraws

  function reopened(open) {
    setTimeout(function () {
      var active = document.activeElement;
      if (!active || active === document.body) open.input.focus();
    }, 0);
    return open.holder;
  }

  /* The labels of ``item``, its Pin button and (an operator of its project) its editor;
     ``redraw`` draws it again after a change. */
  function organiser(item, redraw) {
    var key = item.project + "/" + item.id;
    var full = keyOf(item.kind, item.project, item.id);
    if (editing[full]) return reopened(editing[full]);
    var holder = el("span", { class: "organise", "data-organise": full });
    var result = el("span", { class: "organise-result", role: "status" });
    var pin = el("button", { type: "button", class: "pin", "data-pin": key,
      "aria-pressed": item.pinned ? "true" : "false",
      title: item.pinned ? "Unpin: no longer first" : "Pin: show it first" },
      item.pinned ? "Unpin" : "Pin");
    pin.addEventListener("click", function () {
      pin.disabled = true;
      plainApi(item.pinned ? "DELETE" : "PUT", pinPath(item), item.pinned ? undefined : {})
        .then(function () {
          item.pinned = !item.pinned;
          redraw();
        }, function (e) {
          pin.disabled = false;
          clear(result).appendChild(el("span", { class: "problem" }, describe(e)));
        });
    });
    holder.appendChild(chips(item.labels));
    holder.appendChild(pin);
    if (allowed("operate", item.project)) {
      var edit = el("button", { type: "button", class: "edit-labels", "data-edit-labels": key },
        "Labels");
      edit.addEventListener("click", function () {
        edit.hidden = true;
        var open = editing[full] = { holder: holder, input: null };
        holder.insertBefore(labelsForm(item, open, result, function (saved) {
          delete editing[full];
          if (saved) redraw();
          else edit.hidden = false;
        }), result);
      });
      holder.appendChild(edit);
    }
    holder.appendChild(result);
    return holder;
  }

  function labelsForm(item, open, result, closed) {
    var id = "labels-input-" + (++editors);
    var input = el("input", { id: id, value: item.labels.join(" "), size: 24,
      spellcheck: "false", autocomplete: "off", placeholder: "team:payments nightly" });
    open.input = input;
    var form = el("form", { class: "inline labels-form", "data-labels-form": item.project + "/" +
      item.id }, el("label", { for: id }, "Labels of " + item.id + " "), input,
      el("button", { type: "submit" }, "Save"),
      el("button", { type: "button", class: "cancel" }, "Cancel"));
    form.querySelector(".cancel").addEventListener("click", function () {
      form.remove();
      closed(false);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var wanted = input.value.split(/[\s,]+/).filter(function (w) { return w !== ""; });
      plainApi("PUT", "/projects/" + seg(item.project) + "/" + item.kind + "s/" + seg(item.id) +
        "/labels", { labels: wanted }).then(function (view) {
        item.labels = view.labels;
        closed(true);
      }, function (e) {
        clear(result).appendChild(el("span", { class: "problem" }, describe(e)));
      });
    });
    setTimeout(function () { input.focus(); }, 0);
    return form;
  }

  /* Decorate the rows of a table a page script drew (``attr``: the row attribute naming
     "project/id"): a last cell with the labels, the Pin button and the editor; pinned rows
     first, the others in the order the page drew them. */
  function organiseTable(tableId, kind, attr) {
    var table = $(tableId);
    if (!table) return;
    var tbody = table.tBodies[0];
    var head = table.tHead && table.tHead.rows[0];
    if (head) head.appendChild(el("th", { class: "organise-head" }, "Labels and pin"));
    var observer = new MutationObserver(function () { decorate(); });
    var drawn = 0;  // rows seen so far: the page's order

    function decorate() {
      observer.disconnect();
      var rows = Array.prototype.slice.call(tbody.querySelectorAll("tr[" + attr + "]"));
      rows.forEach(function (tr) {
        if (!tr.hasAttribute("data-order")) tr.setAttribute("data-order", String(drawn++));
        var name = tr.getAttribute(attr);
        var slash = name.indexOf("/");
        var item = known[keyOf(kind, name.slice(0, slash), name.slice(slash + 1))];
        if (!item) return;
        tr.setAttribute("data-pinned", item.pinned ? "true" : "false");
        tr.hidden = tableId === "trigger-list" && filter.label !== "" &&
          item.labels.indexOf(filter.label) < 0;
        var cell = tr.querySelector("td.organise-cell");
        if (!cell) tr.appendChild(cell = el("td", { class: "organise-cell" }));
        var made = organiser(item, decorate);
        if (cell.firstChild !== made) clear(cell).appendChild(made);
      });
      rows.sort(function (a, b) {
        var pa = a.getAttribute("data-pinned") === "true" ? 0 : 1;
        var pb = b.getAttribute("data-pinned") === "true" ? 0 : 1;
        return pa - pb || Number(a.getAttribute("data-order")) - Number(b.getAttribute("data-order"));
      });
      var inOrder = rows.every(function (tr, i) { return tbody.rows[i] === tr; });
      if (!inOrder) rows.forEach(function (tr) { tbody.appendChild(tr); });
      observer.observe(tbody, { childList: true });
    }
    observer.observe(tbody, { childList: true });
    decorate();
  }

  // --- the label filter ------------------------------------------------------------------------

  function labelFilter(form, changed) {
    var input = el("input", { id: "organise-label", name: "label", size: 16, spellcheck: "false",
      autocomplete: "off", placeholder: "(any)", value: filter.label });
    var note = el("span", { class: "problem", id: "organise-label-problem", role: "status",
      hidden: true });
    form.appendChild(el("label", { for: "organise-label" }, "Label ", input));
    form.appendChild(note);
    input.addEventListener("change", function () {
      var wanted = input.value.trim();
      if (wanted !== "" && !LABEL.test(wanted)) {
        note.textContent = "label: 1-48 lowercase letters, digits, '.', '_', ':', '/', '-'";
        note.hidden = false;
        return;
      }
      note.textContent = "";
      note.hidden = true;
      filter.label = wanted;
      changed();
    });
    return input;
  }

  // --- saved filters ---------------------------------------------------------------------------

  /* A saved-filters control for ``page`` in ``where``: ``read`` gives the page's filter as a
     query object, ``apply`` sets it. The saved ones are read when the control is opened. */
  function savedFilters(where, page, read, apply) {
    var select = el("select", { id: "saved-filter" });
    var name = el("input", { id: "saved-filter-name", size: 16, maxlength: 64,
      autocomplete: "off", placeholder: "failed in demo" });
    var result = el("span", { id: "saved-filter-result", role: "status" });
    var saved = {};
    var box = el("details", { id: "saved-filters", class: "saved-filters" },
      el("summary", {}, "Saved filters"),
      el("form", { class: "inline", id: "saved-filter-use" },
        el("label", { for: "saved-filter" }, "Saved ", select),
        el("button", { type: "submit", id: "saved-filter-apply" }, "Apply"),
        el("button", { type: "button", id: "saved-filter-delete" }, "Delete")),
      el("form", { class: "inline", id: "saved-filter-save" },
        el("label", { for: "saved-filter-name" }, "Save this filter as ", name),
        el("button", { type: "submit" }, "Save")),
      result);

    function say(error, text) {
      clear(result).appendChild(el("span", { class: error ? "problem" : "ok-note" },
        error ? describe(error) : text));
    }

    function load(chosen) {
      return plainApi("GET", "/me/filters" + query({ page: page })).then(function (list) {
        clear(select);
        saved = {};
        if (!list.length) select.appendChild(el("option", { value: "" }, "(none saved)"));
        list.forEach(function (f) {
          saved[f.name] = f;
          select.appendChild(el("option", { value: f.name }, f.name));
        });
        if (chosen && saved[chosen]) select.value = chosen;
        box.setAttribute("data-loaded", String(list.length));
      }, function (e) { say(e); });
    }

    box.addEventListener("toggle", function () { if (box.open) load(null); });
    box.querySelector("#saved-filter-use").addEventListener("submit", function (event) {
      event.preventDefault();
      var found = saved[select.value];
      if (!found) return;
      apply(found.query);
      say(null, "Applied " + found.name + ".");
    });
    box.querySelector("#saved-filter-delete").addEventListener("click", function () {
      var chosen = select.value;
      if (!chosen) return;
      plainApi("DELETE", "/me/filters/" + seg(chosen)).then(function () {
        say(null, "Deleted " + chosen + ".");
        return load(null);
      }, function (e) { say(e); });
    });
    box.querySelector("#saved-filter-save").addEventListener("submit", function (event) {
      event.preventDefault();
      var wanted = name.value.trim();
      plainApi("PUT", "/me/filters/" + seg(wanted), { page: page, query: read() })
        .then(function (view) {
          say(null, "Saved " + view.name + ".");
          name.value = "";
          return load(view.name);
        }, function (e) { say(e); });
    });
    where.parentNode.insertBefore(box, where.nextSibling);
    return box;
  }

  function textQuery(pairs) {
    var found = {};
    Object.keys(pairs).forEach(function (k) { if (pairs[k]) found[k] = String(pairs[k]); });
    return found;
  }

  // --- the pages ---------------------------------------------------------------------------------

  function tasksPage(draw) {
    var form = el("form", { id: "organise-filter", class: "inline", autocomplete: "off" });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    var anchor = $("tasks-result");
    anchor.parentNode.insertBefore(form, anchor);
    var input = labelFilter(form, draw);
    savedFilters(form, "tasks", function () { return textQuery({ label: filter.label }); },
      function (q) {
        input.value = q.label || "";
        filter.label = input.value;
        draw();
      });
    organiseTable("tasks", "task", "data-task");
    organiseTable("trigger-list", "trigger", "data-trigger-row");
  }

  function dashboardPage() {
    var form = $("dash-filter");
    var restart = function () { $("dash-project").dispatchEvent(new Event("change")); };
    var input = labelFilter(form, restart);
    savedFilters(form, "dashboard", function () {
      return textQuery({ project: $("dash-project").value, limit: $("dash-limit").value,
        label: filter.label });
    }, function (q) {
      if (q.project !== undefined) $("dash-project").value = q.project;
      if (q.limit) $("dash-limit").value = q.limit;
      input.value = q.label || "";
      filter.label = input.value;
      restart();
    });
    organiseTable("triggers", "trigger", "data-trigger");
  }

  function triggerPage() {
    var project = QL.body.getAttribute("data-project");
    var trigger = QL.body.getAttribute("data-trigger");
    var section = el("section", { id: "organise-trigger", "data-project": project });
    var details = $("trigger-details");
    details.parentNode.insertBefore(section, details);
    var draw = function () {
      var item = known[keyOf("trigger", project, trigger)];
      if (!item) return;
      clear(section).appendChild(el("p", {}, el("strong", {}, "Labels "), organiser(item, draw)));
    };
    onTrigger = draw;
  }

  function runsPage() {
    var fields = ["status", "project", "task", "trigger"];
    savedFilters($("run-filter"), "runs", function () {
      var found = {};
      fields.forEach(function (f) { found[f] = $("filter-" + f).value.trim(); });
      return textQuery(found);
    }, function (q) {
      fields.forEach(function (f) { $("filter-" + f).value = q[f] || ""; });
      $("run-filter").requestSubmit();
    });
  }

  function setup() {
    var page = QL.page;
    if (page === "tasks" && QL.pages.tasks) {
      var drawTasks = QL.pages.tasks;
      tasksPage(function () { drawTasks(); });
    } else if (page === "dashboard") {
      dashboardPage();
    } else if (page === "trigger") {
      triggerPage();
    } else if (page === "runs") {
      runsPage();
    }
  }

  // panel.js starts the page on DOMContentLoaded (its listener came first); this one follows,
  // before any answer the page asked for has arrived
  if (document.readyState === "complete") setup();
  else document.addEventListener("DOMContentLoaded", setup);
})();
