-- Labels on tasks and triggers (issue 23, item 1; docs/panel.md "Labels, pins and saved
-- filters"): short organising tags such as team:payments or nightly, set and cleared by an
-- operator of the project. They are not part of what runs: they live beside the heads, not in
-- the revisions, so setting one publishes nothing and no revision digest covers it. A label
-- names a task or trigger head that exists (heads are never deleted, only hidden); the
-- listings filter on one along the primary key (project, entity, label).
CREATE TABLE qinglong.task_labels (
    project_id varchar(128) NOT NULL,
    task_id    varchar(128) NOT NULL,
    label      varchar(48)  NOT NULL CHECK (label ~ '^[a-z0-9][a-z0-9._:/-]{0,47}$'),
    PRIMARY KEY (project_id, task_id, label),
    FOREIGN KEY (project_id, task_id) REFERENCES qinglong.task_definitions (project_id, task_id)
);

CREATE TABLE qinglong.trigger_labels (
    project_id varchar(128) NOT NULL,
    trigger_id varchar(128) NOT NULL,
    label      varchar(48)  NOT NULL CHECK (label ~ '^[a-z0-9][a-z0-9._:/-]{0,47}$'),
    PRIMARY KEY (project_id, trigger_id, label),
    FOREIGN KEY (project_id, trigger_id) REFERENCES qinglong.triggers (project_id, trigger_id)
);

REVOKE ALL ON qinglong.task_labels, qinglong.trigger_labels FROM PUBLIC;
-- ql_web sets them (the API), ql_admin too (`ql task label`, `ql trigger label`)
GRANT SELECT, INSERT, DELETE ON qinglong.task_labels, qinglong.trigger_labels TO ql_web, ql_admin;
