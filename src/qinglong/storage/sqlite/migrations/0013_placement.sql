-- Placement (issue 21, docs/placement.md; PostgreSQL's migration 0014 has the reasoning).
-- A Run's required worker labels (a JSON array of KEY and KEY=VALUE tokens, NULL: any
-- worker) and the labels an instance offers (a JSON object, NULL: none).
ALTER TABLE runs ADD COLUMN requires TEXT
    CHECK (requires IS NULL OR (json_valid(requires) AND json_type(requires) = 'array'
                                AND requires <> '[]'));
ALTER TABLE instances ADD COLUMN labels TEXT
    CHECK (labels IS NULL OR (json_valid(labels) AND json_type(labels) = 'object'));
