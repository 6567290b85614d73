"""The dashboard's markup (filled by static/dashboard.js): a page of triggers at a time with
what GET /api/v1/triggers/summary says of each, then the recent Runs, the queue and the
processes."""

from __future__ import annotations

DASHBOARD = """
<h1>Dashboard</h1>
<p class="muted">Times in <span id="viewer-zone"></span> (your browser) and UTC.
  Updated <span id="updated">never</span>.</p>
<p id="problem" class="problem" hidden></p>
<section><h2>Triggers</h2>
<form id="dash-filter" class="inline" autocomplete="off">
<label for="dash-project">Project
<select id="dash-project" name="project"><option value="">All projects</option></select></label>
<label for="dash-limit">Per page
<select id="dash-limit" name="limit"><option value="25">25</option>
<option value="50" selected>50</option><option value="100">100</option>
<option value="200">200</option></select></label>
</form>
<div class="table-scroll">
<table id="triggers" class="grid"><thead><tr><th>Trigger</th><th>Task</th><th>Schedule</th>
<th>State</th><th>Next fire (your zone)</th><th>Next fire (UTC)</th><th>Last Run</th>
<th>Success rate</th><th>Largest lag</th></tr></thead><tbody></tbody></table></div>
<p class="pager"><button type="button" id="dash-prev" disabled>Previous</button>
<span id="dash-page">Page 1</span>
<button type="button" id="dash-next" disabled>Next</button></p>
<p class="muted">Success rate and lag over each trigger's last <span id="dash-window">50</span>
Runs: the rate counts what ended (overlap skips and Runs in progress are left out); the lag
is how long after its occurrence a scheduled Run was admitted.</p></section>
<section><h2>Recent Runs</h2>
<div class="table-scroll">
<table id="recent" class="grid"><thead><tr><th>Run</th><th>Project / task</th><th>Trigger</th>
<th>Scheduled for (your zone)</th><th>Status</th><th>Duration</th></tr></thead><tbody></tbody>
</table></div></section>
<section><h2>Queue</h2><p id="queue-summary"></p>
<div class="table-scroll">
<table id="queue" class="grid"><thead><tr><th>Requires (worker labels)</th><th>Queued</th>
<th>Oldest wait</th><th>A live worker offers them</th></tr></thead><tbody></tbody></table>
</div></section>
<section><h2>Processes</h2><p id="process-summary"></p>
<div class="table-scroll">
<table id="processes" class="grid"><thead><tr><th>Role</th><th>Id</th><th>Host</th><th>Pid</th>
<th>Labels</th><th>Started</th><th>Last seen</th><th>Alive</th></tr></thead><tbody></tbody></table>
</div></section>
"""
