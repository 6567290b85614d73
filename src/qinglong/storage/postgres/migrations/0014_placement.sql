-- Placement (issue 21, docs/placement.md). A task may require worker labels; each Run
-- carries its task's requirements (a JSON array of KEY and KEY=VALUE tokens, NULL: any
-- worker), written at admission from the pinned execution plan, so the lease statement can
-- pass over a Run the leasing worker cannot take without reading the plan. A worker records
-- the labels it offers on its instance row (a JSON object, NULL: none), so a Run no live
-- worker can take can be told apart from one that is only waiting its turn.
ALTER TABLE qinglong.runs ADD COLUMN requires jsonb
    CHECK (requires IS NULL OR (jsonb_typeof(requires) = 'array' AND requires <> '[]'::jsonb));
ALTER TABLE qinglong.instances ADD COLUMN labels jsonb
    CHECK (labels IS NULL OR jsonb_typeof(labels) = 'object');
