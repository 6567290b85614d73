-- Task parameters (issue 21, docs/controls/parameters.md): every Run records the value of
-- each of its task's parameters (a JSON object, NULL: the task has none), written at
-- admission, read by the lease statement so the command gets them.
ALTER TABLE qinglong.runs ADD COLUMN parameters jsonb
    CHECK (parameters IS NULL OR jsonb_typeof(parameters) = 'object');
