-- The second factor of password logins (issue 23, item 4; docs/security.md#second-factor).
-- A user's TOTP secret is sealed with the project keyring (AES-256-GCM under QL_SECRET_KEY,
-- bound to the user name), never kept in plain text: a copy of the database alone does not
-- give the codes. It is pending (enabled_at_ms NULL) from enrolment until a code confirms it.
-- last_step is the newest time step a code was accepted for: a code, once used, is refused
-- (the update that accepts it compares and sets the step, so two logins cannot both use
-- it). Recovery codes are kept as SHA-256 digests of 80 random bits, each usable once.
-- ql_web keeps them (the API and `ql user`, which connects as ql_web); nobody else sees them.
CREATE TABLE qinglong.user_second_factors (
    username      varchar(64)  PRIMARY KEY REFERENCES qinglong.users (username),
    key_id        char(16)     NOT NULL,
    sealed        varchar(512) NOT NULL CHECK (length(sealed) >= 1),
    last_step     bigint       NOT NULL CHECK (last_step >= -1),
    created_at_ms bigint       NOT NULL CHECK (created_at_ms >= 0),
    enabled_at_ms bigint       CHECK (enabled_at_ms IS NULL OR enabled_at_ms >= created_at_ms)
);

CREATE TABLE qinglong.user_recovery_codes (
    username    varchar(64) NOT NULL
                REFERENCES qinglong.user_second_factors (username) ON DELETE CASCADE,
    code_digest char(64)    NOT NULL CHECK (code_digest ~ '^[0-9a-f]{64}$'),
    used_at_ms  bigint,
    PRIMARY KEY (username, code_digest)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.user_second_factors TO ql_web;
GRANT SELECT, INSERT, UPDATE, DELETE ON qinglong.user_recovery_codes TO ql_web;
