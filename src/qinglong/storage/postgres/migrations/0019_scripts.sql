-- Scripts (issue 22, docs/scripts.md): per-project files, each save an immutable revision.
--
-- script_blobs holds content by the SHA-256 of its bytes: written once, never changed, shared
-- by every revision (of any project) that saved the same bytes. A task that runs a script
-- pins the digest in its execution plan, and a worker fetches exactly those bytes by it
-- (ql_worker reads script_blobs and nothing else of this migration).
-- scripts is the head of each path: its latest revision, and its digest (NULL once removed).
-- script_revisions is every save and every removal, immutable (who, when, from where).
CREATE TABLE qinglong.script_blobs (
    digest        char(64) PRIMARY KEY CHECK (digest ~ '^[0-9a-f]{64}$'),
    size_bytes    integer  NOT NULL CHECK (size_bytes >= 0),
    content       bytea    NOT NULL CHECK (octet_length(content) = size_bytes),
    created_at_ms bigint   NOT NULL CHECK (created_at_ms >= 0)
);

CREATE TABLE qinglong.scripts (
    project_id    varchar(128) NOT NULL REFERENCES qinglong.projects (id),
    path          varchar(512) NOT NULL CHECK (length(path) >= 1),
    revision      integer      NOT NULL CHECK (revision >= 1),
    digest        char(64)     REFERENCES qinglong.script_blobs (digest),
    updated_at_ms bigint       NOT NULL CHECK (updated_at_ms >= 0),
    PRIMARY KEY (project_id, path)
);

CREATE TABLE qinglong.script_revisions (
    project_id    varchar(128) NOT NULL,
    path          varchar(512) NOT NULL,
    revision      integer      NOT NULL CHECK (revision >= 1),
    digest        char(64)     REFERENCES qinglong.script_blobs (digest),
    source        varchar(160) NOT NULL CHECK (length(source) >= 1),
    created_by    varchar(128) NOT NULL,
    created_at_ms bigint       NOT NULL CHECK (created_at_ms >= 0),
    PRIMARY KEY (project_id, path, revision),
    FOREIGN KEY (project_id, path) REFERENCES qinglong.scripts (project_id, path)
);

GRANT SELECT, INSERT, UPDATE ON qinglong.scripts TO ql_admin, ql_web;
GRANT SELECT, INSERT ON qinglong.script_revisions, qinglong.script_blobs TO ql_admin, ql_web;
GRANT SELECT ON qinglong.script_blobs TO ql_worker;
