-- Fewer index writes per Run (issue 20). A Run writes eight events and four versions of its
-- row on its way from admission to its end:
--
-- * run_events_pkey (id): no statement looks an event up by its id; every reader and the
--   retention sweep find events by Run (run_events_run_id_sequence_key, which stays and now
--   identifies a row for logical replication). The ids are random, so each of the eight
--   events wrote an entry at a random place of the largest index of the table. An event's
--   id stays NOT NULL and is still made unique by its 128 random bits.
-- * runs at fillfactor 85: the start step (dispatching stays dispatching; only the version
--   and the event count move) changes no indexed column, so with room left on the page it
--   is a heap-only update and writes no index entry. A Run started soon after its page was
--   written found room already; the Runs of a burst, whose pages were filled before the
--   first was started, did not, and wrote one entry into each of the Run's seven indexes.
--   Only pages written from now on keep the room.
ALTER TABLE qinglong.run_events DROP CONSTRAINT run_events_pkey;
ALTER TABLE qinglong.run_events REPLICA IDENTITY USING INDEX run_events_run_id_sequence_key;
ALTER TABLE qinglong.runs SET (fillfactor = 85);
