-- Task parameters (PostgreSQL's migration 0015 has the reasoning): the value of each of a
-- Run's task's parameters (a JSON object, NULL: the task has none).
ALTER TABLE runs ADD COLUMN parameters TEXT
    CHECK (parameters IS NULL OR (json_valid(parameters) AND json_type(parameters) = 'object'));
