-- A user's pins and saved filters (migration 0027_pins): the store is
-- storage/pins.py.

-- name: pin_insert
-- Pin a task or a trigger (pinning it again keeps the first pin).
INSERT INTO user_pins (username, project_id, kind, entity_id, pinned_at_ms)
VALUES (:username, :project_id, :kind, :entity_id, :now_ms)
ON CONFLICT (username, project_id, kind, entity_id) DO NOTHING;

-- name: pin_delete
-- Unpin a task or a trigger.
DELETE FROM user_pins
 WHERE username = :username AND project_id = :project_id AND kind = :kind
   AND entity_id = :entity_id;

-- name: pin_count
-- How many pins a user has.
SELECT count(*) AS pins FROM user_pins WHERE username = :username;

-- name: pin_list
-- A user's pins of tasks and triggers that are not deleted, oldest pin first.
SELECT p.project_id, p.kind, p.entity_id, p.pinned_at_ms FROM user_pins p
 WHERE p.username = :username
   AND ((p.kind = 'task' AND EXISTS (
            SELECT 1 FROM task_definitions h
             WHERE h.project_id = p.project_id AND h.task_id = p.entity_id
               AND h.deleted_at_ms IS NULL))
     OR (p.kind = 'trigger' AND EXISTS (
            SELECT 1 FROM triggers h
             WHERE h.project_id = p.project_id AND h.trigger_id = p.entity_id
               AND h.deleted_at_ms IS NULL)))
 ORDER BY p.pinned_at_ms, p.project_id, p.kind, p.entity_id;

-- name: saved_filter_put
-- Save a filter under a name (replacing the one of that name).
INSERT INTO saved_filters (username, name, page, query, saved_at_ms)
VALUES (:username, :name, :page, :query, :now_ms)
ON CONFLICT (username, name) DO UPDATE
   SET page = excluded.page, query = excluded.query, saved_at_ms = excluded.saved_at_ms;

-- name: saved_filter_get
-- One saved filter of a user.
SELECT f.name, f.page, f.query, f.saved_at_ms FROM saved_filters f
 WHERE f.username = :username AND f.name = :name;

-- name: saved_filter_count
-- How many filters a user has saved.
SELECT count(*) AS filters FROM saved_filters WHERE username = :username;

-- name: saved_filter_list
-- A user's saved filters (of one page when page is given), by name.
SELECT f.name, f.page, f.query, f.saved_at_ms FROM saved_filters f
 WHERE f.username = :username AND (:page IS NULL OR f.page = :page)
 ORDER BY f.name;

-- name: saved_filter_delete
-- Delete a saved filter.
DELETE FROM saved_filters WHERE username = :username AND name = :name;
