-- The audit log's filters (issue 23; PostgreSQL's migration 0029 has the reasoning).
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id);
CREATE INDEX audit_log_project_idx ON audit_log (project_id, id) WHERE project_id IS NOT NULL;
