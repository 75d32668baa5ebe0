-- The admin console: sessions of signed-in administrators and their
-- optional second factor. Times are Unix milliseconds (UTC).

-- Console sessions. Only the SHA-256 digest of the session token is kept;
-- the token itself lives in the administrator's cookie.
CREATE TABLE admin_sessions (
    id_hash        BLOB    PRIMARY KEY,            -- SHA-256 of the session token
    admin_id       TEXT    NOT NULL REFERENCES admins(id),
    created_at     INTEGER NOT NULL,
    last_seen_at   INTEGER NOT NULL,               -- idle expiry
    expires_at     INTEGER NOT NULL,               -- absolute expiry
    reauth_at      INTEGER,                        -- last re-authentication
    client_address TEXT    NOT NULL DEFAULT '',
    user_agent     TEXT    NOT NULL DEFAULT '',
    CHECK (length(id_hash) = 32)
) WITHOUT ROWID;

CREATE INDEX admin_sessions_admin ON admin_sessions (admin_id);
CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);

-- TOTP enrollment (RFC 6238) of administrators. last_step is the time step
-- of the last accepted code, so that a code cannot be replayed.
CREATE TABLE admin_totp (
    admin_id   TEXT    PRIMARY KEY REFERENCES admins(id),
    secret     TEXT    NOT NULL,                   -- base32
    enabled_at INTEGER NOT NULL,
    last_step  INTEGER NOT NULL DEFAULT 0
);
