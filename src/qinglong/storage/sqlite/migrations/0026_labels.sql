-- Labels on tasks and triggers (issue 23, item 1; PostgreSQL's migration 0027 has the
-- reasoning): organising tags beside the heads, outside the revisions and their digests.
CREATE TABLE task_labels (
    project_id TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    label      TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 48
                                    AND label NOT GLOB '*[^a-z0-9._:/-]*'
                                    AND substr(label, 1, 1) GLOB '[a-z0-9]'),
    PRIMARY KEY (project_id, task_id, label),
    FOREIGN KEY (project_id, task_id) REFERENCES task_definitions (project_id, task_id)
) STRICT;

CREATE TABLE trigger_labels (
    project_id TEXT NOT NULL,
    trigger_id TEXT NOT NULL,
    label      TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 48
                                    AND label NOT GLOB '*[^a-z0-9._:/-]*'
                                    AND substr(label, 1, 1) GLOB '[a-z0-9]'),
    PRIMARY KEY (project_id, trigger_id, label),
    FOREIGN KEY (project_id, trigger_id) REFERENCES triggers (project_id, trigger_id)
) STRICT;
