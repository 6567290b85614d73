-- A cheaper check of a claim's owner (issue 20). The rule is unchanged: a letter or digit,
-- then letters, digits and . _ : -, at most 128 characters in all. The old pattern said the
-- length with a bounded repetition ({0,127}), which PostgreSQL's regular expression engine
-- expands into 127 states; it builds its automaton afresh for every value it checks, and
-- every claim sets the owner, so that one check cost about 5 % of the server's CPU in a
-- burst of admissions. The column's type (varchar(128)) bounds the length already.
ALTER TABLE qinglong.trigger_schedules DROP CONSTRAINT trigger_schedules_claim_owner_check;
ALTER TABLE qinglong.trigger_schedules ADD CONSTRAINT trigger_schedules_claim_owner_check
    CHECK (claim_owner ~ '^[A-Za-z0-9][A-Za-z0-9._:-]*$');
