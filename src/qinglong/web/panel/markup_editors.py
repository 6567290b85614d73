"""The bodies of the two editor pages, the task editor and the trigger editor: static markup,
every field of the API's publish bodies (``web/requests.py``) with its label. The scripts
(``static/editors.js``) fill and read the fields by their ids."""

from __future__ import annotations

from qinglong.domain.task import DEFAULT_TIMEOUT_MS

TASK_EDITOR = f"""
<h1>Task editor</h1>
<p class="muted">Publishes a task: each publish appends a revision with what the form shows.
Environment values are write-only: they are sent once and never shown again.</p>
<form id="task-form" autocomplete="off">
<label for="task-project">Project <input name="project" id="task-project" list="project-list"
  required placeholder="demo"></label>
<label for="task-id">Task id <input name="task" id="task-id" required placeholder="hello">
  </label>
<label for="task-name">Name <input name="name" id="task-name" placeholder="(optional)"></label>
<label for="task-enabled" class="check"><input type="checkbox" id="task-enabled" checked>
  Enabled</label>
<fieldset class="wide" id="task-command-set"><legend>Command</legend>
<label for="task-kind">Kind <select id="task-kind">
  <option value="shell">shell: a command line run by a shell</option>
  <option value="argv">argv: a program and its arguments, no shell</option>
  <option value="script">script: one of the project's scripts</option></select></label>
<p id="task-kind-note" class="muted" role="status"></p>
<div id="task-shell-fields" class="group">
<label for="task-shell">Shell <select name="shell" id="task-shell">
  <option value="/bin/sh">/bin/sh</option><option value="/bin/bash">/bin/bash</option>
  </select></label>
<label for="task-command" class="grow">Command <textarea name="command" id="task-command"
  rows="4" spellcheck="false" placeholder="echo hello"></textarea></label></div>
<div id="task-argv-fields" class="group" hidden>
<label for="task-argv" class="grow">Program and arguments, one per line <textarea
  id="task-argv" rows="4" spellcheck="false" placeholder="/usr/bin/env&#10;python3&#10;-V"
  aria-describedby="task-argv-note"></textarea></label>
<span id="task-argv-note" class="muted">The first line is an absolute program path; each
  further line is one argument, passed as it is (no quoting, no expansion).</span></div>
<div id="task-script-fields" class="group" hidden>
<label for="task-script-path">Script <input id="task-script-path" list="script-list"
  spellcheck="false" placeholder="jd/sign.py"></label>
<label for="task-interpreter">Interpreter <select id="task-interpreter">
  <option value="">(by its extension)</option><option value="python3">python3</option>
  <option value="node">node</option><option value="bash">bash</option>
  <option value="sh">sh</option></select></label>
<label for="task-script-args" class="grow">Arguments, one per line <textarea
  id="task-script-args" rows="3" spellcheck="false"></textarea></label></div>
</fieldset>
<label for="task-wd">Working directory <input name="working_directory" id="task-wd"
  spellcheck="false" placeholder="(none) an absolute path"></label>
<label for="task-timeout">Timeout <input name="timeout" id="task-timeout" spellcheck="false"
  placeholder="30s, 5m, 1h30m (new tasks: {DEFAULT_TIMEOUT_MS // 60_000}m)"
  aria-describedby="task-timeout-note">
  <span id="task-timeout-note" class="muted" role="status"></span></label>
<fieldset class="wide"><legend>Retries</legend><div class="group">
<label for="task-attempts">Attempts at most <input id="task-attempts" type="number" min="1"
  max="100" step="1" placeholder="1 (no retry)"></label>
<label for="task-backoff">First backoff <input id="task-backoff" spellcheck="false"
  placeholder="10s"></label>
<label for="task-max-backoff">Longest backoff <input id="task-max-backoff" spellcheck="false"
  placeholder="10m"></label>
<label for="task-retry-codes">Retry on exit codes <input id="task-retry-codes"
  spellcheck="false" placeholder="any, or 1, 75"></label>
<label for="task-retry-timeout" class="check"><input type="checkbox" id="task-retry-timeout">
  Retry after a timeout</label></div></fieldset>
<label for="task-concurrency">Concurrency (Runs at once) <input id="task-concurrency"
  type="number" min="1" step="1" placeholder="(no limit)"></label>
<label for="task-idempotent" class="check"><input type="checkbox" id="task-idempotent">
  Idempotent (a lost attempt may run again)</label>
<label for="task-requires">Runs on (worker labels) <input name="requires" id="task-requires"
  spellcheck="false" placeholder="any worker, or gpu, region=eu"></label>
<label for="task-memory">Memory limit <input name="memory_limit" id="task-memory"
  spellcheck="false" placeholder="(none) 512M, 2G"></label>
<label for="task-cpu">CPU-time limit <input name="cpu_limit" id="task-cpu" spellcheck="false"
  placeholder="(none) 30s, 10m"></label>
<fieldset class="wide"><legend>Parameters (what a run now may give values for)</legend>
<div id="param-rows"></div>
<button type="button" id="param-add">Add a parameter</button></fieldset>
<fieldset class="wide"><legend>Environment</legend>
<ul id="env-existing" class="plain"></ul>
<div id="env-new"></div>
<button type="button" id="env-add">Add an entry</button>
<label for="env-clear" class="check"><input type="checkbox" id="env-clear"> Remove every
  entry not given above</label>
</fieldset>
<label for="task-repin" class="check wide"><input type="checkbox" id="task-repin" checked>
  Move the task's triggers onto the new revision</label>
<p class="wide"><button type="submit" id="task-publish" data-needs="admin">Publish</button>
  <span id="task-result" role="status"></span></p>
</form>
<datalist id="project-list"></datalist><datalist id="script-list"></datalist>
"""

TRIGGER_EDITOR = """
<h1>Trigger editor</h1>
<p class="muted">Publishes a trigger bound to a task: a cron expression (5 fields, or 6 with
seconds first), <code>every 90s</code> (optionally <code>from</code> an instant) or
<code>at</code> an instant. The preview below follows what you type. Each publish sends what
the form shows.</p>
<form id="trigger-form" autocomplete="off">
<label for="trigger-project">Project <input name="project" id="trigger-project"
  list="project-list" required placeholder="demo"></label>
<label for="trigger-id">Trigger id <input name="trigger" id="trigger-id" required
  placeholder="nightly"></label>
<label for="trigger-task">Task <select name="task" id="trigger-task" required></select></label>
<label for="trigger-flow">Starts a flow instead (new triggers only) <input id="trigger-flow"
  spellcheck="false" placeholder="(no: a Run of the task)"></label>
<label for="trigger-kind">Kind <select id="trigger-kind">
  <option value="cron">cron: on a calendar</option>
  <option value="interval">interval: every so long</option>
  <option value="once">once: at one instant</option></select></label>
<label for="trigger-enabled" class="check"><input type="checkbox" id="trigger-enabled" checked>
  Enabled</label>
<div id="trigger-interval-fields" class="group wide" hidden>
<label for="trigger-every">Every <input id="trigger-every" spellcheck="false"
  placeholder="90s, 5m, 1h"></label>
<label for="trigger-anchor">From <input id="trigger-anchor" spellcheck="false"
  placeholder="(now) 2027-01-01T09:00:00Z"></label></div>
<div id="trigger-once-fields" class="group wide" hidden>
<label for="trigger-at">At <input id="trigger-at" spellcheck="false"
  placeholder="2027-01-01T09:00:00Z"></label></div>
<label for="trigger-cron">Schedule <input name="schedule" id="trigger-cron" required
  spellcheck="false" placeholder="30 2 * * *, every 90s, at 2027-01-01T09:00:00Z"></label>
<label for="trigger-timezone">Time zone <input name="timezone" id="trigger-timezone"
  list="zone-list" required spellcheck="false"></label>
<label for="trigger-misfire">Misfire (an occurrence missed while down) <select name="misfire"
  id="trigger-misfire"><option value="skip">skip</option>
  <option value="fire_once">fire_once</option></select></label>
<label for="trigger-overlap">Overlap (a Run still running) <select name="overlap"
  id="trigger-overlap"><option value="allow">allow</option><option value="skip">skip</option>
  <option value="queue">queue</option><option value="cancel_previous">cancel_previous</option>
  </select></label>
<label for="trigger-queue-limit" id="trigger-queue-label" hidden>Queue at most
  <input id="trigger-queue-limit" type="number" min="0" max="1000" step="1" value="1"></label>
<label for="trigger-dst-gap">DST gap (wall-clock cron) <select name="dst_gap"
  id="trigger-dst-gap"><option value="">(default: shift)</option><option value="shift">shift
  </option><option value="skip">skip</option></select></label>
<label for="trigger-dst-overlap">DST overlap (wall-clock cron) <select name="dst_overlap"
  id="trigger-dst-overlap"><option value="">(default: first)</option><option value="first">
  first</option><option value="second">second</option><option value="both">both</option>
  </select></label>
<label for="trigger-jitter">Jitter, seconds <input name="jitter_s" id="trigger-jitter"
  type="number" min="0" max="3600" step="1" placeholder="(none)"></label>
<label for="trigger-jitter-random">Random part, seconds <input name="jitter_random_s"
  id="trigger-jitter-random" type="number" min="0" max="3600" step="1" placeholder="0"></label>
<fieldset class="wide"><legend>Values for the task's parameters</legend>
<div id="trigger-params" class="group"><span class="muted">The task has no parameters.</span>
</div></fieldset>
<p class="wide"><button type="submit" id="trigger-publish" data-needs="admin">Publish</button>
  <span id="trigger-result" role="status"></span></p>
</form>
<section><h2>Preview</h2><p id="preview-state" class="muted">Type a schedule.</p>
<div class="table-scroll">
<table id="preview" class="grid"><thead><tr><th>#</th><th>In the trigger's zone</th>
<th>Your zone</th><th>UTC</th><th>DST</th></tr></thead><tbody></tbody></table></div></section>
<datalist id="project-list"></datalist><datalist id="zone-list"></datalist>
"""
