-- Fewer index writes per Run (issue 20). A Run writes eight events on its way from admission
-- to its end. run_events_pkey (id) is read by no statement: every reader and the retention
-- sweep find events by Run (run_events_run_id_sequence_key, which stays and now identifies a
-- row for logical replication). The ids are random, so each event wrote an entry at a random
-- place of the largest index of the table. An event's id stays NOT NULL and is still made
-- unique by its 128 random bits.
ALTER TABLE qinglong.run_events DROP CONSTRAINT run_events_pkey;
ALTER TABLE qinglong.run_events REPLICA IDENTITY USING INDEX run_events_run_id_sequence_key;
