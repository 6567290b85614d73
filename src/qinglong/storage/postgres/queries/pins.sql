-- A user's pins and saved filters (migration 0028_pins): the store is
-- storage/pins.py.

-- name: pin_insert
-- Pin a task or a trigger (pinning it again keeps the first pin).
INSERT INTO qinglong.user_pins (username, project_id, kind, entity_id, pinned_at_ms)
VALUES (%(username)s, %(project_id)s, %(kind)s, %(entity_id)s, %(now_ms)s)
ON CONFLICT (username, project_id, kind, entity_id) DO NOTHING;

-- name: pin_delete
-- Unpin a task or a trigger.
DELETE FROM qinglong.user_pins
 WHERE username = %(username)s AND project_id = %(project_id)s AND kind = %(kind)s
   AND entity_id = %(entity_id)s;

-- name: pin_count
-- How many pins a user has.
SELECT count(*) AS pins FROM qinglong.user_pins WHERE username = %(username)s;

-- name: pin_list
-- A user's pins of tasks and triggers that are not deleted, oldest pin first.
SELECT p.project_id, p.kind, p.entity_id, p.pinned_at_ms FROM qinglong.user_pins p
 WHERE p.username = %(username)s
   AND ((p.kind = 'task' AND EXISTS (
            SELECT 1 FROM qinglong.task_definitions h
             WHERE h.project_id = p.project_id AND h.task_id = p.entity_id
               AND h.deleted_at_ms IS NULL))
     OR (p.kind = 'trigger' AND EXISTS (
            SELECT 1 FROM qinglong.triggers h
             WHERE h.project_id = p.project_id AND h.trigger_id = p.entity_id
               AND h.deleted_at_ms IS NULL)))
 ORDER BY p.pinned_at_ms, p.project_id, p.kind, p.entity_id;

-- name: saved_filter_put
-- Save a filter under a name (replacing the one of that name).
INSERT INTO qinglong.saved_filters (username, name, page, query, saved_at_ms)
VALUES (%(username)s, %(name)s, %(page)s, %(query)s, %(now_ms)s)
ON CONFLICT (username, name) DO UPDATE
   SET page = excluded.page, query = excluded.query, saved_at_ms = excluded.saved_at_ms;

-- name: saved_filter_get
-- One saved filter of a user.
SELECT f.name, f.page, f.query, f.saved_at_ms FROM qinglong.saved_filters f
 WHERE f.username = %(username)s AND f.name = %(name)s;

-- name: saved_filter_count
-- How many filters a user has saved.
SELECT count(*) AS filters FROM qinglong.saved_filters WHERE username = %(username)s;

-- name: saved_filter_list
-- A user's saved filters (of one page when page is given), by name.
SELECT f.name, f.page, f.query, f.saved_at_ms FROM qinglong.saved_filters f
 WHERE f.username = %(username)s AND (%(page)s::varchar IS NULL OR f.page = %(page)s::varchar)
 ORDER BY f.name;

-- name: saved_filter_delete
-- Delete a saved filter.
DELETE FROM qinglong.saved_filters WHERE username = %(username)s AND name = %(name)s;
