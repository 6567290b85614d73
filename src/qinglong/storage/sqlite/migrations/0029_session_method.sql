-- How a session was made: password or single sign-on (issue 23, item 4; PostgreSQL's
-- migration 0030 has the reasoning).
ALTER TABLE user_sessions
    ADD COLUMN method TEXT NOT NULL DEFAULT 'password' CHECK (method IN ('password', 'sso'));
