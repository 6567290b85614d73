-- The audit log's filters (GET /api/v1/audit?actor=...&project=..., issue 23): newest first
-- along (actor, id) and (project_id, id), instead of walking every entry by id until a page
-- of one rare actor or project is found.
CREATE INDEX audit_log_actor_idx ON qinglong.audit_log (actor, id);
CREATE INDEX audit_log_project_idx ON qinglong.audit_log (project_id, id)
    WHERE project_id IS NOT NULL;
