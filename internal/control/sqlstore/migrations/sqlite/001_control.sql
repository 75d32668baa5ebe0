-- The control store. Times are Unix milliseconds (UTC); JSON columns hold
-- the JSON of the domain types of internal/device.

-- API keys. Only the SHA-256 digest of the secret half is kept.
CREATE TABLE api_keys (
    id           TEXT    PRIMARY KEY,           -- keyId, the public half
    name         TEXT    NOT NULL,
    secret_hash  BLOB    NOT NULL,              -- SHA-256 of the secret half
    privileged   INTEGER NOT NULL DEFAULT 0,
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    CHECK (privileged = 0 OR expires_at IS NOT NULL),
    CHECK (length(secret_hash) = 32)
);

-- A revoked key stays revoked and no key gets a new secret.
CREATE TRIGGER api_keys_revocation_is_final
BEFORE UPDATE OF revoked_at ON api_keys
WHEN OLD.revoked_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'api key revocation is final');
END;

CREATE TRIGGER api_keys_secret_is_fixed
BEFORE UPDATE OF secret_hash ON api_keys
BEGIN
    SELECT RAISE(ABORT, 'the secret of an api key cannot change');
END;

CREATE TABLE admins (
    id            TEXT    PRIMARY KEY,
    email         TEXT    NOT NULL UNIQUE COLLATE NOCASE,
    password_hash TEXT    NOT NULL,           -- PHC string, argon2id
    created_at    INTEGER NOT NULL,
    last_login_at INTEGER
);

CREATE TABLE rings (
    name        TEXT    PRIMARY KEY,
    position    INTEGER NOT NULL UNIQUE,
    description TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
);

CREATE TABLE enroll_secrets (
    id           TEXT    PRIMARY KEY,
    secret_hash  BLOB    NOT NULL UNIQUE,       -- SHA-256 of the ples_ token
    ring         TEXT    REFERENCES rings(name),
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    revoked_at   INTEGER,
    last_used_at INTEGER,
    uses         INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agents (
    id               TEXT    PRIMARY KEY,
    hostname         TEXT    NOT NULL,
    os_platform      TEXT    NOT NULL,
    os_name          TEXT    NOT NULL,
    os_version       TEXT    NOT NULL,
    os_build         TEXT    NOT NULL,
    arch             TEXT    NOT NULL,
    agent_version    TEXT    NOT NULL,
    capability       INTEGER NOT NULL,
    ips              TEXT    NOT NULL DEFAULT '[]',   -- JSON array
    ring             TEXT    REFERENCES rings(name),
    enroll_secret_id TEXT    REFERENCES enroll_secrets(id),
    credential_hash  BLOB    NOT NULL,                -- SHA-256 of the plat_ token
    enrolled_at      INTEGER NOT NULL,
    last_seen_at     INTEGER NOT NULL,
    inventory        TEXT    NOT NULL DEFAULT '{"software":[],"pendingUpdates":[]}',
    feature_upgrade  TEXT    NOT NULL DEFAULT 'none', -- state
    feature_target   TEXT    NOT NULL DEFAULT '',
    applied_policies TEXT    NOT NULL DEFAULT '[]',   -- JSON array
    reboot_pending   INTEGER NOT NULL DEFAULT 0,
    removed_at       INTEGER
);

-- List order (hostname, id) over the agents that are not removed.
CREATE INDEX agents_list ON agents (hostname, id) WHERE removed_at IS NULL;
CREATE INDEX agents_ring ON agents (ring, hostname, id) WHERE removed_at IS NULL;

CREATE TABLE policies (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

-- Every version of every policy; policies.version is the current one.
CREATE TABLE policy_versions (
    policy_id  TEXT    NOT NULL REFERENCES policies(id),
    version    INTEGER NOT NULL,
    settings   TEXT    NOT NULL,   -- JSON object
    created_by TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (policy_id, version)
) WITHOUT ROWID;

CREATE TABLE rollouts (
    id             TEXT    PRIMARY KEY,
    name           TEXT    NOT NULL,
    kind           TEXT    NOT NULL,              -- install-updates or apply-policy
    params         TEXT,                          -- JSON object of the commands
    policy_id      TEXT    REFERENCES policies(id),
    policy_version INTEGER,
    rings          TEXT    NOT NULL,              -- JSON array of ring names, in order
    ring_index     INTEGER NOT NULL DEFAULT -1,
    state          TEXT    NOT NULL,
    created_by     TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

CREATE TABLE commands (
    id           TEXT    PRIMARY KEY,
    agent_id     TEXT    NOT NULL REFERENCES agents(id),
    type         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    params       TEXT,                            -- JSON object
    result       TEXT,                            -- JSON of device.Result
    created_by   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    rollout_id   TEXT    REFERENCES rollouts(id),
    rollout_ring TEXT
);

-- Check-in: the queued commands of one agent, oldest first.
CREATE INDEX commands_agent ON commands (agent_id, state, created_at);
-- Newest first, for the lists.
CREATE INDEX commands_created ON commands (created_at, id);
-- The expiry sweep over active commands.
CREATE INDEX commands_active ON commands (expires_at) WHERE state IN ('queued', 'delivered', 'running');
CREATE INDEX commands_rollout ON commands (rollout_id, rollout_ring, state) WHERE rollout_id IS NOT NULL;

CREATE TABLE log_bundles (
    command_id   TEXT    PRIMARY KEY REFERENCES commands(id),
    agent_id     TEXT    NOT NULL REFERENCES agents(id),
    content_type TEXT    NOT NULL,
    size         INTEGER NOT NULL,
    sha256       BLOB    NOT NULL,
    content      BLOB    NOT NULL,
    created_at   INTEGER NOT NULL
);

-- The System Audit log, hash-chained (see internal/audit).
CREATE TABLE audit_log (
    id             INTEGER PRIMARY KEY,   -- 1, 2, 3 … set by the appender
    time           INTEGER NOT NULL,
    actor          TEXT    NOT NULL,
    key_id         TEXT    NOT NULL DEFAULT '',
    action         TEXT    NOT NULL,
    method         TEXT    NOT NULL DEFAULT '',
    path           TEXT    NOT NULL DEFAULT '',
    status         INTEGER NOT NULL DEFAULT 0,
    client_address TEXT    NOT NULL DEFAULT '',
    details        TEXT,                  -- JSON of the event
    prev_hash      BLOB    NOT NULL,
    hash           BLOB    NOT NULL
);

CREATE INDEX audit_log_key ON audit_log (key_id, id) WHERE key_id != '';
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Append-only: the chain detects changes made past these triggers.
CREATE TRIGGER audit_log_no_update
BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;

CREATE TRIGGER audit_log_no_delete
BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'the audit log is append-only');
END;
