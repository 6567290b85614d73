-- Scripts (issue 22, docs/scripts.md; PostgreSQL's migration 0019 has the reasoning): content
-- by its SHA-256 (written once), the head of each path (digest NULL once removed) and every
-- save and removal as an immutable revision.
CREATE TABLE script_blobs (
    digest        TEXT    NOT NULL PRIMARY KEY CHECK (length(digest) = 64),
    size_bytes    INTEGER NOT NULL CHECK (size_bytes >= 0),
    content       BLOB    NOT NULL CHECK (length(content) = size_bytes),
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0)
) STRICT;

CREATE TABLE scripts (
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    path          TEXT    NOT NULL CHECK (length(path) BETWEEN 1 AND 512),
    revision      INTEGER NOT NULL CHECK (revision >= 1),
    digest        TEXT    REFERENCES script_blobs (digest),
    updated_at_ms INTEGER NOT NULL CHECK (updated_at_ms >= 0),
    PRIMARY KEY (project_id, path)
) STRICT;

CREATE TABLE script_revisions (
    project_id    TEXT    NOT NULL,
    path          TEXT    NOT NULL,
    revision      INTEGER NOT NULL CHECK (revision >= 1),
    digest        TEXT    REFERENCES script_blobs (digest),
    source        TEXT    NOT NULL CHECK (length(source) BETWEEN 1 AND 160),
    created_by    TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, path, revision),
    FOREIGN KEY (project_id, path) REFERENCES scripts (project_id, path)
) STRICT;
