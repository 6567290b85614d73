-- Single sign-on with OpenID Connect (issue 23, item 4; docs/security.md#single-sign-on).
-- A login in progress: what the authorization request sent (its state, kept as a SHA-256
-- digest only), the PKCE verifier, nonce and redirect URI the callback must match, and
-- where to go after it; taken (deleted) by the first callback that names its state, and useless after
-- expires_at_ms.
CREATE TABLE oidc_pending_logins (
    state_digest  TEXT    NOT NULL PRIMARY KEY CHECK (length(state_digest) = 64),
    issuer        TEXT    NOT NULL,
    verifier      TEXT    NOT NULL,
    nonce         TEXT    NOT NULL,
    redirect_uri  TEXT    NOT NULL,
    next_path     TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms INTEGER NOT NULL CHECK (expires_at_ms > created_at_ms)
) STRICT;
CREATE INDEX oidc_pending_logins_expires_idx ON oidc_pending_logins (expires_at_ms);

-- The identity (issuer, subject) each user logged in with first: a later login naming the
-- same user with another subject, or the same subject naming another user, is refused (a
-- renamed or reused claim cannot take an account over).
CREATE TABLE oidc_identities (
    issuer           TEXT    NOT NULL,
    subject          TEXT    NOT NULL,
    username         TEXT    NOT NULL REFERENCES users (username),
    linked_at_ms     INTEGER NOT NULL CHECK (linked_at_ms >= 0),
    last_login_at_ms INTEGER NOT NULL CHECK (last_login_at_ms >= linked_at_ms),
    PRIMARY KEY (issuer, subject),
    UNIQUE (issuer, username)
) STRICT;
