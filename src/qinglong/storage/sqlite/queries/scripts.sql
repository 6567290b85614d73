-- name: script_project
-- The project a script belongs to, and whether it is active.
SELECT id, status FROM projects WHERE id = :project_id;

-- name: script_head
-- A path's head: its latest revision (digest NULL once removed).
SELECT project_id, path, revision, digest, updated_at_ms FROM scripts
WHERE project_id = :project_id AND path = :path;

-- name: script_head_insert
-- The first revision of a path.
INSERT INTO scripts (project_id, path, revision, digest, updated_at_ms)
VALUES (:project_id, :path, :revision, :digest, :now_ms);

-- name: script_head_move
-- The head to its next revision, only from the revision the writer read (compare-and-set).
UPDATE scripts SET revision = :revision, digest = :digest, updated_at_ms = :now_ms
WHERE project_id = :project_id AND path = :path AND revision = :expected;

-- name: script_blob_insert
-- Content by its SHA-256; the same bytes saved again add nothing.
INSERT INTO script_blobs (digest, size_bytes, content, created_at_ms)
VALUES (:digest, :size_bytes, :content, :now_ms)
ON CONFLICT (digest) DO NOTHING;

-- name: script_revision_insert
-- One save or removal, immutable.
INSERT INTO script_revisions (project_id, path, revision, digest, source, created_by,
                              created_at_ms)
VALUES (:project_id, :path, :revision, :digest, :source, :created_by, :now_ms);

-- name: script_list
-- The project's scripts under a folder (every one for an empty prefix), by path; removed
-- ones only when asked for.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM scripts s
JOIN script_revisions r
  ON r.project_id = s.project_id AND r.path = s.path AND r.revision = s.revision
LEFT JOIN script_blobs b ON b.digest = r.digest
WHERE s.project_id = :project_id
  AND substr(s.path, 1, length(:prefix)) = :prefix
  AND (s.digest IS NOT NULL OR :removed)
ORDER BY s.path;

-- name: script_history
-- Every revision of a path, newest first.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM script_revisions r LEFT JOIN script_blobs b ON b.digest = r.digest
WHERE r.project_id = :project_id AND r.path = :path
ORDER BY r.revision DESC
LIMIT :limit;

-- name: script_revision_get
-- One revision of a path with its content (NULL for a removal).
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms, b.content
FROM script_revisions r LEFT JOIN script_blobs b ON b.digest = r.digest
WHERE r.project_id = :project_id AND r.path = :path AND r.revision = :revision;

-- name: script_blob_get
-- Content by its SHA-256 (what a worker runs).
SELECT digest, size_bytes, content FROM script_blobs WHERE digest = :digest;

-- name: script_history_one
-- One revision of a path, without its content.
SELECT r.project_id, r.path, r.revision, r.digest, b.size_bytes, r.source, r.created_by,
       r.created_at_ms
FROM script_revisions r LEFT JOIN script_blobs b ON b.digest = r.digest
WHERE r.project_id = :project_id AND r.path = :path AND r.revision = :revision;
