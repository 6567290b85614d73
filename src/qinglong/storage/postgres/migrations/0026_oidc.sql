-- Single sign-on with OpenID Connect (issue 23, item 4; docs/security.md#single-sign-on).
-- A login in progress: what the authorization request sent (its state, kept as a SHA-256
-- digest only), the PKCE verifier, nonce and redirect URI the callback must match, and
-- where to go after it; taken (deleted) by the first callback that names its state, and useless after
-- expires_at_ms.
CREATE TABLE qinglong.oidc_pending_logins (
    state_digest  char(64)      PRIMARY KEY CHECK (state_digest ~ '^[0-9a-f]{64}$'),
    issuer        varchar(512)  NOT NULL,
    verifier      varchar(128)  NOT NULL,
    nonce         varchar(128)  NOT NULL,
    redirect_uri  varchar(2000) NOT NULL,
    next_path     varchar(2000) NOT NULL,
    created_at_ms bigint        NOT NULL CHECK (created_at_ms >= 0),
    expires_at_ms bigint        NOT NULL CHECK (expires_at_ms > created_at_ms)
);
CREATE INDEX oidc_pending_logins_expires_idx ON qinglong.oidc_pending_logins (expires_at_ms);

-- The identity (issuer, subject) each user logged in with first: a later login naming the
-- same user with another subject, or the same subject naming another user, is refused (a
-- renamed or reused claim cannot take an account over).
CREATE TABLE qinglong.oidc_identities (
    issuer           varchar(512) NOT NULL,
    subject          varchar(255) NOT NULL,
    username         varchar(64)  NOT NULL REFERENCES qinglong.users (username),
    linked_at_ms     bigint       NOT NULL CHECK (linked_at_ms >= 0),
    last_login_at_ms bigint       NOT NULL CHECK (last_login_at_ms >= linked_at_ms),
    PRIMARY KEY (issuer, subject),
    UNIQUE (issuer, username)
);

REVOKE ALL ON qinglong.oidc_pending_logins, qinglong.oidc_identities FROM PUBLIC;
GRANT SELECT, INSERT, DELETE ON qinglong.oidc_pending_logins TO ql_web;
GRANT SELECT, INSERT, UPDATE ON qinglong.oidc_identities TO ql_web;
