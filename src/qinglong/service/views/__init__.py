"""Views: the JSON shapes the surfaces print (``ql ... --json``) and serve (the HTTP API), one
typed model per shape, built by the service and described by the same models in the OpenAPI
document.

Instants appear twice: RFC 3339 in UTC (``*_at``) and epoch milliseconds (``*_at_ms``). Task
environment values and channel secrets are write-only: views carry names and whether a
secret is set, never the values. ``base`` says what every view is; the modules hold the
views of one area each (tasks, triggers, runs, reports, notify, accounts, system).
"""
