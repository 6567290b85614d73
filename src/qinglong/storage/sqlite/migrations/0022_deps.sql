-- Project dependency sets (issue 22, item 4; docs/dependencies.md; PostgreSQL's migration
-- 0023 has the reasoning): every change a revision holding the whole canonical set and its
-- SHA-256; the latest revision is the project's current set.
CREATE TABLE dep_set_revisions (
    project_id     TEXT    NOT NULL REFERENCES projects (id),
    revision       INTEGER NOT NULL CHECK (revision >= 1),
    digest         TEXT    NOT NULL CHECK (length(digest) = 64 AND digest NOT GLOB '*[^0-9a-f]*'),
    set_json       TEXT    NOT NULL CHECK (json_valid(set_json) AND json_type(set_json) = 'object'),
    created_by     TEXT    NOT NULL,
    created_at_ms  INTEGER NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, revision)
) STRICT;
