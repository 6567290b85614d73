-- A user's pins and saved filters (issue 23, item 1; PostgreSQL's migration 0028 has the
-- reasoning).
CREATE TABLE user_pins (
    username     TEXT    NOT NULL REFERENCES users (username),
    project_id   TEXT    NOT NULL REFERENCES projects (id),
    kind         TEXT    NOT NULL CHECK (kind IN ('task', 'trigger')),
    entity_id    TEXT    NOT NULL CHECK (length(entity_id) BETWEEN 1 AND 128),
    pinned_at_ms INTEGER NOT NULL CHECK (pinned_at_ms >= 0),
    PRIMARY KEY (username, project_id, kind, entity_id)
) STRICT;

CREATE TABLE saved_filters (
    username    TEXT    NOT NULL REFERENCES users (username),
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    page        TEXT    NOT NULL CHECK (page IN ('runs', 'dashboard', 'tasks')),
    query       TEXT    NOT NULL CHECK (length(query) <= 8192),
    saved_at_ms INTEGER NOT NULL CHECK (saved_at_ms >= 0),
    PRIMARY KEY (username, name)
) STRICT;
