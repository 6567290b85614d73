"""The bodies of the panel's administration pages: users, API tokens, the audit log, the
cluster's processes and the notifications (channels, rules, deliveries). Static markup, no
value from the database: ``static/admin.js`` fills the elements by their ids. A write control
is marked ``data-needs`` (hidden from a role that may not use it) or built by the script only
for a role that may; every field has its ``<label for>``."""

from __future__ import annotations

USERS = """
<h1>Users</h1>
<p class="muted">Who may log in and with which role, and whether their second factor is off,
pending (set up, not confirmed) or on. A new password or disabling a user ends their sessions
and revokes their tokens; resetting a second factor lets them log in with the password alone.
Also <code>ql user</code>.</p>
<p id="problem" class="problem" hidden></p>
<p id="users-result" role="status"></p>
<div class="table-scroll">
<table id="users" class="grid"><thead><tr><th>User</th><th>Role</th><th>State</th>
<th>Second factor</th><th>Created (your zone)</th><th>Changed (your zone)</th><th>Actions</th></tr></thead>
<tbody></tbody></table></div>
<section data-needs="admin"><h2>Add a user</h2>
<form id="user-create" class="inline" autocomplete="off">
<label for="user-name">User name <input id="user-name" required size="20"
  spellcheck="false" placeholder="alice"></label>
<label for="user-role">Role on every project <select id="user-role">
  <option value="none">none (only projects granted)</option>
  <option value="viewer" selected>viewer</option>
  <option value="operator">operator</option><option value="admin">admin</option></select></label>
<label for="user-password">Password <input id="user-password" type="password" required
  autocomplete="new-password"></label>
<label for="user-password2">Password again <input id="user-password2" type="password"
  required autocomplete="new-password"></label>
<button type="submit" id="user-create-submit">Add user</button>
<span id="user-create-problem" class="problem" role="alert" hidden></span>
</form></section>
<section><h2>Roles on one project</h2>
<p class="muted">A grant gives a user a role on one project, above their role on every
project. A project's admins manage its grants. Also <code>ql user grant</code>.</p>
<form id="grants-filter" class="inline">
<label for="grants-project">Project <select id="grants-project"></select></label></form>
<p id="grants-result" role="status"></p>
<div class="table-scroll">
<table id="grants" class="grid"><thead><tr><th>User</th><th>Role on the project</th>
<th>Granted by</th><th>Granted (your zone)</th><th></th></tr></thead><tbody></tbody></table>
</div>
<form id="grant-add" class="inline" autocomplete="off" hidden>
<label for="grant-user">User <input id="grant-user" required size="16" list="grant-users"
  spellcheck="false"></label>
<datalist id="grant-users"></datalist>
<label for="grant-role">Role <select id="grant-role"><option>viewer</option>
  <option>operator</option><option>admin</option></select></label>
<button type="submit" id="grant-add-submit">Grant</button>
<span id="grant-add-problem" class="problem" role="alert" hidden></span>
</form></section>
"""

TOKENS = """
<h1>API tokens</h1>
<p class="muted">A token lets a script call the API as its user, with a scope no wider than
the user's role. Its secret is shown once, when it is made; it is stored only as a digest.
Also <code>ql token</code>.</p>
<p id="problem" class="problem" hidden></p>
<p id="tokens-result" role="status"></p>
<section><h2>New token</h2>
<form id="token-create" class="inline" autocomplete="off">
<label for="token-name">Name <input id="token-name" required size="20" maxlength="128"
  placeholder="backup script"></label>
<label for="token-scope">Scope <select id="token-scope"></select></label>
<label for="token-expires">Expires in <input id="token-expires" size="10"
  placeholder="30d" spellcheck="false"></label>
<label for="token-projects">Only projects <input id="token-projects" size="18"
  spellcheck="false" placeholder="(every project)"></label>
<label for="token-owner" data-needs="admin">For user <input id="token-owner" size="16"
  list="token-users" placeholder="(yourself)" spellcheck="false"></label>
<datalist id="token-users"></datalist>
<button type="submit" id="token-create-submit">Create token</button>
<span id="token-create-problem" class="problem" role="alert" hidden></span>
</form>
<p class="muted">Expires in: a duration such as 12h, 30d or 365d; empty: until revoked.
Only projects: project ids separated by commas; the token reaches nothing else.</p>
<div id="token-secret" class="secret-once" hidden>
<p><strong>Copy the token now: it is shown only this once.</strong></p>
<p><label for="token-secret-value">Token</label>
<input id="token-secret-value" class="mono" readonly size="80">
<button type="button" id="token-copy">Copy</button>
<span id="token-copy-result" role="status"></span></p>
</div></section>
<section><h2>Tokens</h2>
<form id="token-filter" class="inline" data-needs="admin">
<label for="token-all"><input type="checkbox" id="token-all"> Everyone's tokens</label></form>
<div class="table-scroll">
<table id="tokens" class="grid"><thead><tr><th>Id</th><th>Name</th><th>User</th><th>Scope</th>
<th>State</th><th>Projects</th><th>Created</th><th>Expires</th><th>Last used</th><th></th></tr></thead>
<tbody></tbody></table></div></section>
"""

AUDIT = """
<h1>Audit log</h1>
<p class="muted">Every write through the API or <code>ql</code>: who, how, from where and
what changed, newest first. Times in your browser's zone.</p>
<form id="audit-filter" class="inline" autocomplete="off" novalidate>
<label for="audit-actor">User <input id="audit-actor" list="audit-users" size="14"
  spellcheck="false"></label>
<datalist id="audit-users"></datalist>
<label for="audit-action">Action <input id="audit-action" list="audit-actions" size="18"
  spellcheck="false" placeholder="task, notify.test"></label>
<datalist id="audit-actions"></datalist>
<label for="audit-project">Project <input id="audit-project" list="audit-projects" size="14"
  spellcheck="false"></label>
<datalist id="audit-projects"></datalist>
<label for="audit-since">From <input id="audit-since" type="datetime-local" step="1"></label>
<label for="audit-until">Until <input id="audit-until" type="datetime-local" step="1"></label>
<label for="audit-limit">Per page <select id="audit-limit"><option>25</option>
  <option selected>50</option><option>100</option><option>500</option></select></label>
<button type="submit" id="audit-apply">Filter</button>
<button type="button" id="audit-clear">Clear</button>
<span id="audit-problem" class="problem" role="alert" hidden></span>
</form>
<p id="problem" class="problem" hidden></p>
<div class="table-scroll">
<table id="audit" class="grid"><thead><tr><th>When</th><th>User</th><th>Via</th>
<th>Action</th><th>Project</th><th>Target</th><th>Detail</th><th>Client</th></tr></thead>
<tbody></tbody></table></div>
<p class="pager"><button type="button" id="audit-newer" disabled>Newer</button>
<span id="audit-page">Page 1</span>
<button type="button" id="audit-older" disabled>Older</button></p>
"""

CLUSTER = """
<h1>Cluster</h1>
<p class="muted">The processes serving this database and their health, refreshed every 5
seconds. A process that has not been seen for 10 s is stale; for 30 s, dead (it stopped
without saying so). Updated <span id="cluster-updated">never</span>.</p>
<p id="problem" class="problem" hidden></p>
<p id="cluster-summary"></p>
<div class="table-scroll">
<table id="cluster" class="grid"><thead><tr><th>Role</th><th>Id</th><th>Host</th>
<th>Pid</th><th>Labels</th><th>Started (your zone)</th><th>Last seen</th><th>State</th></tr>
</thead><tbody></tbody></table></div>
<section><h2>Global limit</h2>
<p>At most <strong id="limit-global">…</strong> Runs execute at once, everywhere (each worker
also runs at most its slots, each task at most its concurrency).</p>
<form id="limit-form" class="inline" autocomplete="off" data-needs="admin">
<label for="limit-value">New limit <input id="limit-value" type="number" min="1" size="8"
  placeholder="none"></label>
<button type="submit" id="limit-set">Set</button>
<button type="button" id="limit-clear">Remove the limit</button>
</form><p id="limit-result" role="status"></p></section>
<section><h2>Queue</h2><p id="cluster-queue-summary"></p>
<div class="table-scroll">
<table id="cluster-queue" class="grid"><thead><tr><th>Requires (worker labels)</th>
<th>Queued</th><th>Oldest wait</th><th>A live worker offers them</th></tr></thead>
<tbody></tbody></table></div></section>
"""

_CHANNEL_FIELDS = """
<label for="ch-url" data-kinds="webhook template">URL <input id="ch-url" size="40"
  spellcheck="false" placeholder="https://hooks.example.com/ql"></label>
<label for="ch-preset" data-kinds="template">Preset <select id="ch-preset">
  <option value="">(none: a URL)</option><option>telegram</option><option>bark</option>
  </select></label>
<label for="ch-service" data-kinds="service">Service <select id="ch-service">
  <option>dingtalk</option><option>feishu</option><option>wecom</option>
  <option>serverchan</option><option>pushplus</option><option>ntfy</option>
  <option>gotify</option><option>slack</option><option>discord</option></select></label>
<label for="ch-method" data-kinds="template">Method <select id="ch-method">
  <option>POST</option><option>PUT</option><option>GET</option></select></label>
<label for="ch-content-type" data-kinds="template">Content type <input id="ch-content-type"
  size="18" placeholder="application/json"></label>
<label for="ch-body" data-kinds="template">Body template (JSON) <textarea id="ch-body"
  rows="3" cols="40" spellcheck="false" placeholder='{"text": "{title}"}'></textarea></label>
<label for="ch-headers" data-kinds="webhook template">Headers (one per line)
  <textarea id="ch-headers" rows="2" cols="30" spellcheck="false"
  placeholder="X-Team: ops"></textarea></label>
<label for="ch-params" data-kinds="template service">Parameters (NAME=value, one per line)
  <textarea id="ch-params" rows="2" cols="30" spellcheck="false"
  placeholder="server=https://ntfy.sh"></textarea></label>
<label for="ch-smtp-host" data-kinds="email">SMTP host <input id="ch-smtp-host"
  size="20"></label>
<label for="ch-smtp-port" data-kinds="email">SMTP port <input id="ch-smtp-port" size="5"
  inputmode="numeric" placeholder="587"></label>
<label for="ch-smtp-security" data-kinds="email">Security <select id="ch-smtp-security">
  <option>starttls</option><option>tls</option><option>none</option></select></label>
<label for="ch-smtp-user" data-kinds="email">SMTP user <input id="ch-smtp-user"
  size="16"></label>
<label for="ch-from" data-kinds="email">From <input id="ch-from" size="24"></label>
<label for="ch-to" data-kinds="email">To (comma-separated) <input id="ch-to"
  size="30"></label>
<label for="ch-secret">Secret (write-only) <input id="ch-secret" type="password" size="24"
  autocomplete="new-password"></label>
<label for="ch-timeout">Timeout <input id="ch-timeout" size="6" placeholder="10s"></label>
<label for="ch-attempts">Attempts <input id="ch-attempts" size="4" inputmode="numeric"
  placeholder="5"></label>
"""

NOTIFICATIONS = f"""
<h1>Notifications</h1>
<p class="muted">Channels say where notifications go; rules attach them to projects and
tasks; each notification for each channel is a delivery in the outbox. Secrets are never
shown. Also <code>ql notify</code>.</p>
<p id="problem" class="problem" hidden></p>
<p id="notify-test-result" role="status"></p>
<p id="notify-result" role="status"></p>
<section><h2>Channels</h2>
<div class="table-scroll">
<table id="notify-channels" class="grid"><thead><tr><th>Channel</th><th>Kind</th>
<th>Target</th><th>Secret</th><th>Rules</th><th>Actions</th></tr></thead><tbody></tbody>
</table></div>
<form id="channel-add" class="inline" autocomplete="off" data-needs="admin">
<label for="ch-name">Name <input id="ch-name" required size="14" spellcheck="false"
  placeholder="ops-hook"></label>
<label for="ch-kind">Kind <select id="ch-kind"><option>webhook</option><option>email</option>
  <option>template</option><option>service</option></select></label>
{_CHANNEL_FIELDS}
<button type="submit" id="channel-add-submit">Add channel</button>
<span id="channel-add-problem" class="problem" role="alert" hidden></span>
</form></section>
<section><h2>Rules</h2>
<form id="rules-filter" class="inline">
<label for="rules-project">Project <select id="rules-project"></select></label></form>
<div class="table-scroll">
<table id="notify-rules" class="grid"><thead><tr><th>Channel</th><th>Task</th><th>Events</th>
<th>Delays</th><th>Added (your zone)</th><th></th></tr></thead><tbody></tbody></table></div>
<form id="rule-add" class="inline" autocomplete="off" hidden>
<label for="rule-channel">Channel <select id="rule-channel"></select></label>
<label for="rule-task">Task <input id="rule-task" size="14" spellcheck="false"
  placeholder="(every task)"></label>
<fieldset id="rule-events"><legend>Events (none ticked: the defaults)</legend></fieldset>
<label for="rule-unplaceable">Unplaceable after <input id="rule-unplaceable" size="6"
  placeholder="5m"></label>
<label for="rule-running-long">Running long after <input id="rule-running-long" size="6"
  placeholder="10m"></label>
<label for="rule-late-start">Late start after <input id="rule-late-start" size="6"
  placeholder="1m"></label>
<button type="submit" id="rule-add-submit">Add rule</button>
<span id="rule-add-problem" class="problem" role="alert" hidden></span>
</form></section>
<section><h2>Deliveries</h2>
<form id="deliveries-filter" class="inline">
<label for="deliveries-status">Status <select id="deliveries-status"><option value="">any
  </option><option>pending</option><option>sending</option><option>delivered</option>
  <option>dead</option></select></label>
<button type="button" id="deliveries-refresh">Refresh</button></form>
<div class="table-scroll">
<table id="notify-deliveries" class="grid"><thead><tr><th>Delivery</th><th>Channel</th>
<th>Event</th><th>Status</th><th>Attempts</th><th>Next attempt</th><th>Last error</th>
<th>Project / task</th><th>Occurred (your zone)</th><th></th></tr></thead><tbody></tbody>
</table></div></section>
"""
