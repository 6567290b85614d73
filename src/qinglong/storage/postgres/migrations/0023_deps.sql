-- Project dependency sets (issue 22, item 4; docs/dependencies.md): the Python requirements
-- and Node packages a project's scripts need. Every change appends a revision holding the
-- whole canonical set and its SHA-256 (a worker caches the environment it builds for a set
-- under that digest); the latest revision is the project's current set. Revisions are never
-- changed or deleted: no UPDATE or DELETE is granted to anyone.
CREATE TABLE qinglong.dep_set_revisions (
    project_id     varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    revision       integer      NOT NULL CHECK (revision >= 1),
    digest         char(64)     NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    set_json       jsonb        NOT NULL CHECK (jsonb_typeof(set_json) = 'object'),
    created_by     varchar(128) NOT NULL,
    created_at_ms  bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, revision)
);

-- ql_admin and ql_web change sets; ql_worker reads the current set of a script's project
-- (and of an install Run's) when an Attempt starts.
GRANT SELECT, INSERT ON qinglong.dep_set_revisions TO ql_admin, ql_web;
GRANT SELECT ON qinglong.dep_set_revisions TO ql_worker;
