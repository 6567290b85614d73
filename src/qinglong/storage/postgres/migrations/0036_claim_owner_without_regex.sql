-- The claim owner's check without a regular expression (issue 20). The rule is unchanged: a
-- letter or digit, then letters, digits and . _ : - (the column's varchar(128) bounds the
-- length). Every claim sets the owner, so every claim ran the check; PostgreSQL's regular
-- expression engine builds its automaton's states afresh for every value it matches, and
-- even 0035's simpler pattern cost about 4 % of the server's CPU in a burst of admissions.
-- ltrim() with the allowed characters leaves nothing of a valid owner, and the first
-- character must not be one of the four punctuation marks; an empty owner fails both.
ALTER TABLE qinglong.trigger_schedules DROP CONSTRAINT trigger_schedules_claim_owner_check;
ALTER TABLE qinglong.trigger_schedules ADD CONSTRAINT trigger_schedules_claim_owner_check
    CHECK (strpos('._:-', left(claim_owner, 1)) = 0 AND ltrim(claim_owner,
           'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-') = '');
