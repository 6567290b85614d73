-- name: second_factor_get
-- A user's second factor (pending or on), with how many recovery codes are left.
SELECT f.username, f.key_id, f.sealed, f.last_step, f.created_at_ms, f.enabled_at_ms,
       (SELECT count(*) FROM user_recovery_codes c
         WHERE c.username = f.username AND c.used_at_ms IS NULL) AS codes_left
  FROM user_second_factors f
 WHERE f.username = :username;

-- name: second_factor_insert
-- A new pending second factor.
INSERT INTO user_second_factors (username, key_id, sealed, last_step, created_at_ms,
                                 enabled_at_ms)
VALUES (:username, :key_id, :sealed, -1, :now_ms, NULL);

-- name: second_factor_delete
-- Forget a user's second factor (its recovery codes go with it).
DELETE FROM user_second_factors WHERE username = :username;

-- name: second_factor_enable
-- Turn a pending second factor on, at the step of the code that confirmed it.
UPDATE user_second_factors SET enabled_at_ms = :now_ms, last_step = :step
 WHERE username = :username AND enabled_at_ms IS NULL AND last_step < :step;

-- name: second_factor_step_use
-- Accept a code of a given step: only a later step than any used (a code is good once).
UPDATE user_second_factors SET last_step = :step
 WHERE username = :username AND enabled_at_ms IS NOT NULL AND last_step < :step;

-- name: recovery_code_insert
-- One recovery code of a user, as its digest.
INSERT INTO user_recovery_codes (username, code_digest, used_at_ms)
VALUES (:username, :code_digest, NULL);

-- name: recovery_code_use
-- Use a recovery code once.
UPDATE user_recovery_codes SET used_at_ms = :now_ms
 WHERE username = :username AND code_digest = :code_digest AND used_at_ms IS NULL
   AND EXISTS (SELECT 1 FROM user_second_factors f
                WHERE f.username = :username AND f.enabled_at_ms IS NOT NULL);

-- name: second_factor_all
-- Every second factor (pending or on), by user name.
SELECT f.username, f.key_id, f.sealed, f.last_step, f.created_at_ms, f.enabled_at_ms,
       0 AS codes_left
  FROM user_second_factors f
 ORDER BY f.username;

-- name: second_factor_reseal
-- Seal a second factor's secret again under another key (only while under the one read).
UPDATE user_second_factors SET key_id = :key_id, sealed = :sealed
 WHERE username = :username AND key_id = :old_key_id;
