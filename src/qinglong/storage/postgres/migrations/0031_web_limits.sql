-- The global limit from the HTTP API and the panel (issue 23: GET and PUT /api/v1/limits):
-- ql_web reads and changes the cluster-wide cap as ql_admin does (`ql limits set`).
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.concurrency_limits TO ql_web;
