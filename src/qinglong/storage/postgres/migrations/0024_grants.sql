-- Per-project roles (issue 23, item 3; docs/security.md "Tenants"). A user's role in
-- users.role applies to every project unless all_projects is false: then the user has no
-- role outside the projects granted in user_grants (viewer, operator or admin, one per
-- project). An API token may be limited to some projects (api_tokens.projects, their ids
-- joined by commas; NULL: every project its user may reach). A grant names a project that
-- exists; removing a grant deletes its row (the audit log keeps who did it).
ALTER TABLE qinglong.users ADD COLUMN all_projects boolean NOT NULL DEFAULT true;
ALTER TABLE qinglong.api_tokens ADD COLUMN projects varchar(4096)
    CHECK (projects IS NULL OR projects ~ '^[a-z0-9-]+(,[a-z0-9-]+)*$');

CREATE TABLE qinglong.user_grants (
    username      varchar(64)  NOT NULL REFERENCES qinglong.users (username),
    project_id    varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    role          varchar(16)  NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    granted_by    varchar(64)  NOT NULL,
    granted_at_ms bigint       NOT NULL CHECK (granted_at_ms >= 0),
    PRIMARY KEY (username, project_id)
);
CREATE INDEX user_grants_project_idx ON qinglong.user_grants (project_id, username);

REVOKE ALL ON qinglong.user_grants FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.user_grants TO ql_web;
