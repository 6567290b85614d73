"""The panel pages' bodies: static markup, no value from the database. The script
(``static/panel.js``) fills the elements by their ids; each table sits in a box that scrolls
sideways when the table is wider than the screen."""

from __future__ import annotations

TASKS = """
<h1>Tasks</h1>
<p><a href="/tasks/edit" data-needs="admin">New task</a></p>
<p id="problem" class="problem" hidden></p>
<p id="tasks-result" role="status"></p>
<section><h2>Projects</h2>
<div class="table-scroll">
<table id="projects" class="grid"><thead><tr><th>Project</th><th>Name</th><th>Status</th>
<th>Triggers paused</th><th></th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Triggers</h2>
<div class="table-scroll">
<table id="trigger-list" class="grid"><thead><tr><th>Trigger</th><th>Task</th><th>Schedule
</th><th>State</th><th></th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Tasks</h2>
<div class="table-scroll">
<table id="tasks" class="grid"><thead><tr><th>Project</th><th>Task</th><th>Command</th>
<th>Revision</th><th>Enabled</th><th>Environment (names only)</th><th>Timeout</th>
<th>Runs on (worker labels)</th><th></th>
</tr></thead><tbody></tbody></table></div></section>
"""

TRIGGER = """
<h1>Trigger <span id="trigger-title"></span></h1>
<p id="problem" class="problem" hidden></p>
<p class="actions"><button type="button" id="trigger-fire" data-needs="operate">Fire now</button>
<button type="button" id="trigger-switch" data-needs="operate" hidden></button>
<button type="button" id="trigger-delete" class="danger" data-needs="admin">Delete</button>
<a id="trigger-edit" data-needs="admin">Edit</a> <a id="trigger-runs">Runs</a>
<span id="trigger-action-result" role="status"></span></p>
<form id="pause-form" class="inline" data-needs="operate" autocomplete="off">
<label for="pause-until">Pause until <input id="pause-until" spellcheck="false"
  placeholder="(until resumed), 10m, 2h or 2027-01-01T09:00:00Z"></label>
<label for="pause-reason">Reason <input id="pause-reason" maxlength="500"
  placeholder="(optional)"></label>
<button type="submit" id="trigger-pause">Pause</button>
<button type="button" id="trigger-resume">Resume</button></form>
<dl id="trigger-details" class="details"></dl>
<section><h2>Next fires</h2>
<div class="table-scroll">
<table id="next-fires" class="grid"><thead><tr><th>In the trigger's zone</th><th>Your zone</th>
<th>UTC</th></tr></thead><tbody></tbody></table></div></section>
<section id="backfill" data-needs="operate"><h2>Backfill</h2>
<p class="muted">Admit a Run for each past occurrence in a window that has none (one Run per
occurrence, however often it is asked). The window ends before the trigger's next undecided
occurrence.</p>
<form id="backfill-form" class="inline" autocomplete="off">
<label for="backfill-from">From <input id="backfill-from" spellcheck="false" required
  placeholder="2h (ago) or 2027-01-01T09:00:00Z"></label>
<label for="backfill-to">To <input id="backfill-to" spellcheck="false" required
  placeholder="10m (ago) or 2027-01-01T10:00:00Z"></label>
<button type="submit" id="backfill-plan-button">Show what it admits</button>
<button type="button" id="backfill-run" disabled>Backfill</button>
<button type="button" id="backfill-stop" hidden>Stop</button></form>
<p id="backfill-result" role="status"></p>
<p id="backfill-state" hidden><progress id="backfill-progress" max="1" value="0"></progress>
<span id="backfill-count" role="status"></span></p>
<ol id="backfill-log" class="plain"></ol>
<div class="table-scroll">
<table id="backfill-plan" class="grid"><thead><tr><th>#</th><th>Occurrence (trigger's zone)
</th><th>Your zone</th><th>UTC</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Occurrence ledger</h2>
<form id="ledger-form" class="inline"><label>Window <select id="ledger-window">
<option value="3600000">last hour</option><option value="21600000">last 6 hours</option>
<option value="86400000">last 24 hours</option><option value="604800000">last 7 days</option>
</select></label><label>At most <select id="ledger-limit"><option>50</option><option>200
</option><option>1000</option></select></label></form>
<p id="ledger-counts" class="muted"></p>
<div class="table-scroll">
<table id="ledger" class="grid"><thead><tr><th>Nominal time (trigger's zone)</th>
<th>Your zone</th><th>UTC</th><th>Revision</th><th>Fate</th><th>Runs</th></tr></thead>
<tbody></tbody></table></div></section>
"""

RUNS = """
<h1>Runs</h1>
<form id="run-filter" class="inline">
<label>Status <select id="filter-status" name="status"><option value="">(any)</option>
<option>created</option><option>queued</option><option>dispatching</option>
<option>running</option><option>waiting_approval</option><option>retry_wait</option>
<option>succeeded</option><option>failed</option><option>cancelled</option>
<option>timed_out</option><option>lost</option></select></label>
<label>Project <input id="filter-project" name="project" size="12"></label>
<label>Task <input id="filter-task" name="task" size="12"></label>
<label>Trigger <input id="filter-trigger" name="trigger" size="12"></label>
<button type="submit">Apply</button></form>
<p id="problem" class="problem" hidden></p>
<div class="table-scroll">
<table id="runs" class="grid"><thead><tr><th>Run</th><th>Project / task</th><th>Trigger</th>
<th>Type</th><th>Scheduled for (your zone)</th><th>Admitted (your zone)</th><th>Status</th>
<th>Duration</th><th>Exit</th></tr></thead><tbody></tbody></table></div>
<p class="pager"><button type="button" id="page-prev">Previous</button>
<span id="page-label"></span> <button type="button" id="page-next">Next</button></p>
"""

RUN = """
<h1>Run <span id="run-title"></span> <span id="run-status"></span></h1>
<p id="problem" class="problem" hidden></p>
<p class="actions"><button type="button" id="run-cancel" data-needs="operate" hidden>Cancel
</button> <span id="cancel-result" role="status"></span></p>
<dl id="run-details" class="details"></dl>
<section><h2>Attempts</h2>
<div class="table-scroll">
<table id="attempts" class="grid"><thead><tr><th>#</th><th>Status</th><th>Executor</th>
<th>Pid</th><th>Started</th><th>Finished</th><th>Exit</th><th>Error</th></tr></thead>
<tbody></tbody></table></div></section>
<section><h2>Timeline</h2><ol id="timeline" class="timeline"></ol></section>
<section><h2>Log</h2><p id="log-state" class="muted">waiting for the first attempt</p>
<pre id="log" class="log"></pre></section>
"""

STATS = """
<h1>Stats</h1>
<form id="stats-form" class="inline">
<label>Project <select id="stats-project"></select></label>
<label>Task <select id="stats-task"><option value="">(every task)</option></select></label>
<label>Days <select id="stats-days"><option>7</option><option>14</option><option>30</option>
<option>90</option></select></label></form>
<p id="problem" class="problem" hidden></p>
<p id="stats-zone" class="muted"></p>
<figure><div id="stats-chart"></div><figcaption id="stats-legend" class="legend">
</figcaption></figure>
<section><h2>Totals per task</h2>
<div class="table-scroll">
<table id="stats-totals" class="grid"><thead><tr><th>Task</th><th>Runs</th><th>Successes</th>
<th>Failures</th><th>Cancelled</th><th>Success rate</th><th>Average duration</th>
<th>Longest</th></tr></thead><tbody></tbody></table></div></section>
<section><h2>Per day</h2>
<div class="table-scroll">
<table id="stats-days-table" class="grid"><thead><tr><th>Day</th><th>Task</th><th>Runs</th>
<th>Successes</th><th>Failures</th><th>Cancelled</th><th>Total duration</th><th>Longest</th>
</tr></thead><tbody></tbody></table></div></section>
"""

LOGIN = """
<h1>Log in</h1>
<form id="login-form" class="login" autocomplete="on">
<label>User name <input name="username" id="login-username" autocomplete="username" required
  autofocus></label>
<label>Password <input name="password" id="login-password" type="password"
  autocomplete="current-password" required></label>
<div id="login-second" hidden>
<p class="muted">This account has a second factor: type the code your authenticator app
shows, or one of your recovery codes.</p>
<label for="login-otp">One-time code <input name="otp" id="login-otp" inputmode="numeric"
  autocomplete="one-time-code" maxlength="6" size="8" spellcheck="false"></label>
<label for="login-recovery">or a recovery code <input name="recovery_code"
  id="login-recovery" autocomplete="off" size="22" spellcheck="false"></label>
</div>
<p><button type="submit" id="login-submit">Log in</button></p>
<p id="login-error" class="problem" role="alert" hidden></p>
</form>
"""

FLOWS = """
<h1>Flows</h1>
<p class="muted">Graphs of a project's tasks: each node runs once its edges allow it, and its
Run is admitted exactly once. Publish with <code>ql flow publish -f FILE</code> or the API.</p>
<form id="flows-form" class="inline">
<label>Project <select id="flows-project"></select></label></form>
<p id="problem" class="problem" hidden></p>
<p id="start-result" role="status"></p>
<section><h2>Flows</h2>
<div class="table-scroll">
<table id="flows" class="grid"><thead><tr><th>Flow</th><th>Name</th><th>Revision</th>
<th>Nodes</th><th>Failure policy</th><th>Timeout</th><th></th></tr></thead><tbody></tbody>
</table></div></section>
<section><h2>Flow runs</h2>
<div class="table-scroll">
<table id="flow-runs" class="grid"><thead><tr><th>Flow run</th><th>Flow</th><th>Status</th>
<th>Started (your zone)</th><th>By</th><th>Ended</th></tr></thead><tbody></tbody></table>
</div></section>
"""

FLOW_RUN = """
<h1>Flow run <span id="flow-run-title"></span> <span id="flow-run-status"></span></h1>
<p id="problem" class="problem" hidden></p>
<p class="actions"><button type="button" id="flow-run-cancel" data-needs="operate" hidden>
Cancel</button> <span id="cancel-result" role="status"></span></p>
<dl id="flow-run-details" class="details"></dl>
<figure class="flow-graph"><div id="flow-graph"></div><figcaption class="legend">Edges:
solid on success, dashed on failure, dotted always. Select a node for its Run.</figcaption>
</figure>
<section><h2>Nodes</h2>
<div class="table-scroll">
<table id="flow-steps" class="grid"><thead><tr><th>Node</th><th>Task</th><th>State</th>
<th>Run</th><th>Run status</th><th>Released</th><th>Ended</th><th>Note</th></tr></thead>
<tbody></tbody></table></div></section>
"""

SCRIPTS = """
<h1>Scripts</h1>
<p class="muted">A project's scripts: every save is a revision named by the SHA-256 of its
content, and the tasks that run a script move onto the new content (a Run already admitted
runs what it pinned). Also <code>ql script put|get|ls|diff|rm|history</code>.</p>
<form id="scripts-form" class="inline">
<label>Project <select id="scripts-project"></select></label>
<label>New script <input id="script-new-path" placeholder="jd/sign.py" size="28"></label>
<button type="button" id="script-new" data-needs="admin">New</button></form>
<p id="problem" class="problem" hidden></p>
<div class="scripts-layout">
<section class="scripts-list"><h2>Files</h2>
<div class="table-scroll">
<table id="scripts" class="grid"><thead><tr><th>Path</th><th>Rev</th><th>Bytes</th>
<th>Saved (your zone)</th></tr></thead><tbody></tbody></table></div></section>
<section class="scripts-editor"><h2><span id="script-path">No script open</span>
<span id="script-revision" class="muted"></span></h2>
<div id="script-code" class="code-editor" hidden>
<pre id="script-gutter" class="code-gutter" aria-hidden="true"></pre>
<div class="code-area"><pre id="script-highlight" class="code-highlight" aria-hidden="true"></pre>
<textarea id="script-text" class="code-input" spellcheck="false" autocomplete="off"
aria-label="Script content" wrap="off"></textarea></div></div>
<p class="actions" id="script-actions" hidden>
<button type="button" id="script-save" data-needs="admin">Save</button>
<label data-needs="admin"><input type="checkbox" id="script-keep-tasks"> Keep tasks on their
revision</label>
<button type="button" id="script-diff">Diff against the running revision</button>
<button type="button" id="script-remove" data-needs="admin">Remove</button>
<span id="script-result" role="status"></span></p>
<pre id="script-diff-view" class="code-diff" hidden></pre>
<h3>History</h3>
<div class="table-scroll">
<table id="script-history" class="grid"><thead><tr><th>Rev</th><th>SHA-256</th><th>Bytes</th>
<th>Source</th><th>By</th><th>Saved</th></tr></thead><tbody></tbody></table></div>
</section></div>
"""

SUBSCRIPTIONS = """
<h1>Subscriptions</h1>
<p class="muted">Git repositories whose scripts a project pulls. Each pull is a Run of the
subscription's pull task: it imports the branch's scripts in one transaction and, with
auto-tasks, keeps tasks in step with the scripts' <code>cron:</code> lines. Also
<code>ql repo add|pull|ls|show|rm</code>.</p>
<form id="repos-form" class="inline">
<label>Project <select id="repos-project"></select></label></form>
<p id="problem" class="problem" hidden></p>
<p id="repo-result" role="status"></p>
<section><h2>Subscriptions</h2>
<div class="table-scroll">
<table id="repos" class="grid"><thead><tr><th>Name</th><th>Repository</th><th>Branch</th>
<th>Auto-tasks</th><th>Last commit</th><th>Last pull (your zone)</th><th>Last pull did</th>
<th></th></tr></thead><tbody></tbody></table></div></section>
<section data-needs="admin"><h2>Subscribe</h2>
<form id="repo-add" class="inline">
<label>Name <input id="repo-name" required placeholder="jd" size="20"></label>
<label>Repository URL <input id="repo-url" required size="60"
placeholder="https://github.com/owner/scripts.git"></label>
<label>Branch <input id="repo-branch" value="main" size="20"></label>
<label>Pull schedule (cron, optional) <input id="repo-schedule" placeholder="0 */6 * * *"
size="20"></label>
<label>Time zone <input id="repo-timezone" value="UTC" size="20"></label>
<label>Script globs (space-separated) <input id="repo-include"
placeholder="*.py *.js *.mjs *.cjs *.sh" size="40"></label>
<label>Exclude globs <input id="repo-exclude" size="40"></label>
<label><input type="checkbox" id="repo-auto-tasks"> Make tasks from the scripts' cron: lines
</label>
<button type="submit" id="repo-add-button">Subscribe</button></form></section>
"""

ENVIRONMENT = """
<h1>Environment</h1>
<p class="muted">Named values every Run of a project's tasks gets (a task's own entry wins).
A secret's value is sealed with the server's key and never shown again: here, in the API, the
CLI or an export. Every change is a revision, in the audit log. Also
<code>ql env set|ls|show|rm|history</code>.</p>
<form id="env-form" class="inline">
<label>Project <select id="env-project"></select></label></form>
<p id="problem" class="problem" hidden></p>
<p id="env-result" role="status"></p>
<p id="env-revision" class="muted"></p>
<section><h2>Entries</h2>
<div class="table-scroll">
<table id="env-entries" class="grid"><thead><tr><th>Name</th><th>Value</th><th>Enabled</th>
<th>Description</th><th>Value digest</th><th></th></tr></thead><tbody></tbody></table>
</div></section>
<section data-needs="admin"><h2>Set an entry</h2>
<form id="env-set" class="inline" autocomplete="off">
<label>Name <input id="env-name" required placeholder="JD_COOKIE" size="24"
spellcheck="false"></label>
<label>Value <input id="env-value" type="password" size="40" spellcheck="false"
autocomplete="new-password"></label>
<label><input type="checkbox" id="env-secret" checked> Secret (write-only)</label>
<label><input type="checkbox" id="env-enabled" checked> Enabled</label>
<label>Description <input id="env-description" size="30"></label>
<button type="submit" id="env-save">Set</button></form></section>
<section><h2>History</h2>
<div class="table-scroll">
<table id="env-history" class="grid"><thead><tr><th>Revision</th><th>Change</th><th>Entry</th>
<th>What changed</th><th>By</th><th>When (your zone)</th></tr></thead><tbody></tbody></table>
</div></section>
"""
