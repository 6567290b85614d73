-- Notifications over the HTTP API (`ql web`, as ql_web; docs/api.md): admins manage channels
-- and rules as ql_admin does (a removed channel is kept with its secret erased, its rules
-- deleted), readers list them and the outbox, operators retry a dead delivery. A test send
-- reads the channel's secret. Backfill over the API needs nothing new: it admits Runs with
-- the rows run now writes. The capability row stays as it is (no new contract).
GRANT SELECT, INSERT, UPDATE ON qinglong.notify_channels TO ql_web;
GRANT SELECT, INSERT, DELETE ON qinglong.notify_rules TO ql_web;
GRANT SELECT, UPDATE ON qinglong.notify_outbox TO ql_web;
