-- name: second_factor_get
-- A user's second factor (pending or on), with how many recovery codes are left.
SELECT f.username, f.key_id, f.sealed, f.last_step, f.created_at_ms, f.enabled_at_ms,
       (SELECT count(*) FROM qinglong.user_recovery_codes c
         WHERE c.username = f.username AND c.used_at_ms IS NULL) AS codes_left
  FROM qinglong.user_second_factors f
 WHERE f.username = %(username)s;

-- name: second_factor_insert
-- A new pending second factor.
INSERT INTO qinglong.user_second_factors (username, key_id, sealed, last_step, created_at_ms,
                                 enabled_at_ms)
VALUES (%(username)s, %(key_id)s, %(sealed)s, -1, %(now_ms)s, NULL);

-- name: second_factor_delete
-- Forget a user's second factor (its recovery codes go with it).
DELETE FROM qinglong.user_second_factors WHERE username = %(username)s;

-- name: second_factor_enable
-- Turn a pending second factor on, at the step of the code that confirmed it.
UPDATE qinglong.user_second_factors SET enabled_at_ms = %(now_ms)s, last_step = %(step)s
 WHERE username = %(username)s AND enabled_at_ms IS NULL AND last_step < %(step)s;

-- name: second_factor_step_use
-- Accept a code of a given step: only a later step than any used (a code is good once).
UPDATE qinglong.user_second_factors SET last_step = %(step)s
 WHERE username = %(username)s AND enabled_at_ms IS NOT NULL AND last_step < %(step)s;

-- name: recovery_code_insert
-- One recovery code of a user, as its digest.
INSERT INTO qinglong.user_recovery_codes (username, code_digest, used_at_ms)
VALUES (%(username)s, %(code_digest)s, NULL);

-- name: recovery_code_use
-- Use a recovery code once.
UPDATE qinglong.user_recovery_codes SET used_at_ms = %(now_ms)s
 WHERE username = %(username)s AND code_digest = %(code_digest)s AND used_at_ms IS NULL
   AND EXISTS (SELECT 1 FROM qinglong.user_second_factors f
                WHERE f.username = %(username)s AND f.enabled_at_ms IS NOT NULL);

-- name: second_factor_all
-- Every second factor (pending or on), by user name.
SELECT f.username, f.key_id, f.sealed, f.last_step, f.created_at_ms, f.enabled_at_ms,
       0 AS codes_left
  FROM qinglong.user_second_factors f
 ORDER BY f.username;

-- name: second_factor_reseal
-- Seal a second factor's secret again under another key (only while under the one read).
UPDATE qinglong.user_second_factors SET key_id = %(key_id)s, sealed = %(sealed)s
 WHERE username = %(username)s AND key_id = %(old_key_id)s;
