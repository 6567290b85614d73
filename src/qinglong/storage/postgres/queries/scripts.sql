-- name: script_project
-- The project a script belongs to, and whether it is active.
SELECT id, status FROM qinglong.projects WHERE id = %(project_id)s;

-- name: script_head
-- A path's head: its latest revision (digest NULL once removed).
SELECT project_id, path, revision, digest, updated_at_ms FROM qinglong.scripts
WHERE project_id = %(project_id)s AND path = %(path)s;

-- name: script_head_insert
-- The first revision of a path.
INSERT INTO qinglong.scripts (project_id, path, revision, digest, updated_at_ms)
VALUES (%(project_id)s, %(path)s, %(revision)s, %(digest)s, %(now_ms)s);

-- name: script_head_move
-- The head to its next revision, only from the revision the writer read (compare-and-set).
UPDATE qinglong.scripts SET revision = %(revision)s, digest = %(digest)s, updated_at_ms = %(now_ms)s
WHERE project_id = %(project_id)s AND path = %(path)s AND revision = %(expected)s;

-- name: script_blob_insert
-- Content by its SHA-256; the same bytes saved again add nothing.
INSERT INTO qinglong.script_blobs (digest, size_bytes, content, created_at_ms)
VALUES (%(digest)s, %(size_bytes)s, %(content)s, %(now_ms)s)
ON CONFLICT (digest) DO NOTHING;

-- name: script_revision_insert
-- One save or removal, immutable.
INSERT INTO qinglong.script_revisions (project_id, path, revision, digest, source, created_by,
                              created_at_ms)
VALUES (%(project_id)s, %(path)s, %(revision)s, %(digest)s, %(source)s, %(created_by)s, %(now_ms)s);

-- name: script_list
-- The project's scripts under a folder (every one for an empty prefix), by path; removed
-- ones only when asked for.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM qinglong.scripts s
JOIN qinglong.script_revisions r
  ON r.project_id = s.project_id AND r.path = s.path AND r.revision = s.revision
LEFT JOIN qinglong.script_blobs b ON b.digest = r.digest
WHERE s.project_id = %(project_id)s
  AND substr(s.path, 1, length(%(prefix)s::text)) = %(prefix)s
  AND (s.digest IS NOT NULL OR %(removed)s::boolean)
ORDER BY s.path;

-- name: script_history
-- Every revision of a path, newest first.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM qinglong.script_revisions r LEFT JOIN qinglong.script_blobs b ON b.digest = r.digest
WHERE r.project_id = %(project_id)s AND r.path = %(path)s
ORDER BY r.revision DESC
LIMIT %(limit)s;

-- name: script_revision_get
-- One revision of a path with its content (NULL for a removal).
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms, b.content
FROM qinglong.script_revisions r LEFT JOIN qinglong.script_blobs b ON b.digest = r.digest
WHERE r.project_id = %(project_id)s AND r.path = %(path)s AND r.revision = %(revision)s;

-- name: script_blob_get
-- Content by its SHA-256 (what a worker runs).
SELECT digest, size_bytes, content FROM qinglong.script_blobs WHERE digest = %(digest)s;

-- name: script_history_one
-- One revision of a path, without its content.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM qinglong.script_revisions r LEFT JOIN qinglong.script_blobs b ON b.digest = r.digest
WHERE r.project_id = %(project_id)s AND r.path = %(path)s AND r.revision = %(revision)s;
