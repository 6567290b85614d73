-- How a session was made (issue 23, item 4; docs/security.md#single-sign-on): with the
-- password (and qinglong's second factor, when the user has one on) or by single sign-on
-- (the provider's login, and its multi-factor, stand for both). --require-second-factor
-- gates password sessions only: a single-sign-on session is never asked for qinglong's
-- TOTP, so it must not be made to enrol one either. Sessions made before this migration
-- were password sessions or single-sign-on ones alike; they are taken as password sessions
-- (the stricter reading: at worst such a session is asked to enrol once more).
ALTER TABLE qinglong.user_sessions
    ADD COLUMN method varchar(16) NOT NULL DEFAULT 'password'
        CHECK (method IN ('password', 'sso'));
