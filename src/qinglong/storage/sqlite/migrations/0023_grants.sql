-- Per-project roles (issue 23, item 3; PostgreSQL's migration 0024 has the reasoning).
ALTER TABLE users ADD COLUMN all_projects INTEGER NOT NULL DEFAULT 1
    CHECK (all_projects IN (0, 1));
ALTER TABLE api_tokens ADD COLUMN projects TEXT
    CHECK (projects IS NULL OR (length(projects) BETWEEN 1 AND 4096
                                AND projects NOT GLOB '*[^a-z0-9,-]*'));

CREATE TABLE user_grants (
    username      TEXT    NOT NULL REFERENCES users (username),
    project_id    TEXT    NOT NULL REFERENCES projects (id),
    role          TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    granted_by    TEXT    NOT NULL CHECK (length(granted_by) BETWEEN 1 AND 64),
    granted_at_ms INTEGER NOT NULL CHECK (granted_at_ms >= 0),
    PRIMARY KEY (username, project_id)
) STRICT;
CREATE INDEX user_grants_project_idx ON user_grants (project_id, username);
