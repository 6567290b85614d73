-- A user's pins and saved filters (issue 23, item 1; docs/panel.md "Labels, pins and saved
-- filters"). A pin puts a task or a trigger first on the user's dashboard and tasks page; a
-- saved filter keeps the query of a panel page (runs, dashboard, tasks) under a name. Both
-- belong to the user alone (the API's /api/v1/me/...): a pin names a project the user could
-- read when it was made, and the listing of pins keeps only the projects the user may read
-- now. ql_web keeps them; nobody else sees them.
CREATE TABLE qinglong.user_pins (
    username     varchar(64)  NOT NULL REFERENCES qinglong.users (username),
    project_id   varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    kind         varchar(8)   NOT NULL CHECK (kind IN ('task', 'trigger')),
    entity_id    varchar(128) NOT NULL,
    pinned_at_ms bigint       NOT NULL CHECK (pinned_at_ms >= 0),
    PRIMARY KEY (username, project_id, kind, entity_id)
);

CREATE TABLE qinglong.saved_filters (
    username    varchar(64)   NOT NULL REFERENCES qinglong.users (username),
    name        varchar(64)   NOT NULL CHECK (length(name) >= 1),
    page        varchar(16)   NOT NULL CHECK (page IN ('runs', 'dashboard', 'tasks')),
    query       varchar(8192) NOT NULL,  -- a JSON object of text values
    saved_at_ms bigint        NOT NULL CHECK (saved_at_ms >= 0),
    PRIMARY KEY (username, name)
);

REVOKE ALL ON qinglong.user_pins, qinglong.saved_filters FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON qinglong.user_pins TO ql_web;
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.saved_filters TO ql_web;
