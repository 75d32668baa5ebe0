-- The control store on PostgreSQL: the tables of the SQLite store, in
-- PostgreSQL's dialect. Times are Unix milliseconds (UTC), as on SQLite, so
-- that a copy between the two backends is exact. JSON columns are text
-- holding the JSON of the domain types of internal/device as written, byte
-- for byte. Text columns collate as "C", bytewise like SQLite, so that
-- orders and keyset cursors agree between the two backends.

-- API keys. Only the SHA-256 digest of the secret half is kept.
CREATE TABLE api_keys (
    id           text COLLATE "C"    PRIMARY KEY,           -- keyId, the public half
    name         text COLLATE "C"    NOT NULL,
    secret_hash  bytea   NOT NULL,              -- SHA-256 of the secret half
    privileged   boolean NOT NULL DEFAULT false,
    created_by   text COLLATE "C"    NOT NULL,
    created_at   bigint  NOT NULL,
    last_used_at bigint,
    expires_at   bigint,
    revoked_at   bigint,
    CHECK (NOT privileged OR expires_at IS NOT NULL),
    CHECK (octet_length(secret_hash) = 32)
);

-- A revoked key stays revoked and no key gets a new secret.
CREATE FUNCTION api_keys_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'api key revocation is final';
    END IF;
    IF NEW.secret_hash IS DISTINCT FROM OLD.secret_hash THEN
        RAISE EXCEPTION 'the secret of an api key cannot change';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER api_keys_guard BEFORE UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_guard();

CREATE TABLE admins (
    id            text COLLATE "C"   PRIMARY KEY,
    email         text COLLATE "C"   NOT NULL,
    password_hash text COLLATE "C"   NOT NULL,            -- PHC string, argon2id
    created_at    bigint NOT NULL,
    last_login_at bigint
);

-- Email addresses are unique without regard to case, as SQLite's NOCASE.
CREATE UNIQUE INDEX admins_email ON admins (lower(email));

-- Console sessions. Only the SHA-256 digest of the session token is kept.
CREATE TABLE admin_sessions (
    id_hash        bytea  PRIMARY KEY,          -- SHA-256 of the session token
    admin_id       text COLLATE "C"   NOT NULL REFERENCES admins(id),
    created_at     bigint NOT NULL,
    last_seen_at   bigint NOT NULL,             -- idle expiry
    expires_at     bigint NOT NULL,             -- absolute expiry
    reauth_at      bigint,                      -- last re-authentication
    client_address text COLLATE "C"   NOT NULL DEFAULT '',
    user_agent     text COLLATE "C"   NOT NULL DEFAULT '',
    CHECK (octet_length(id_hash) = 32)
);

CREATE INDEX admin_sessions_admin ON admin_sessions (admin_id);
CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);

-- TOTP enrollment (RFC 6238). last_step is the time step of the last
-- accepted code, so that a code cannot be replayed.
CREATE TABLE admin_totp (
    admin_id   text COLLATE "C"   PRIMARY KEY REFERENCES admins(id),
    secret     text COLLATE "C"   NOT NULL,                 -- base32
    enabled_at bigint NOT NULL,
    last_step  bigint NOT NULL DEFAULT 0
);

CREATE TABLE rings (
    name        text COLLATE "C"    PRIMARY KEY,
    position    integer NOT NULL UNIQUE,
    description text COLLATE "C"    NOT NULL DEFAULT '',
    created_at  bigint  NOT NULL,
    rule        text COLLATE "C"                            -- JSON of device.RingRule, NULL for none
);

CREATE TABLE enroll_secrets (
    id           text COLLATE "C"   PRIMARY KEY,
    secret_hash  bytea  NOT NULL UNIQUE,        -- SHA-256 of the ples_ token
    ring         text COLLATE "C"   REFERENCES rings(name),
    created_by   text COLLATE "C"   NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint,
    revoked_at   bigint,
    last_used_at bigint,
    uses         bigint NOT NULL DEFAULT 0
);

CREATE TABLE agents (
    id               text COLLATE "C"    PRIMARY KEY,
    hostname         text COLLATE "C"    NOT NULL,
    os_platform      text COLLATE "C"    NOT NULL,
    os_name          text COLLATE "C"    NOT NULL,
    os_version       text COLLATE "C"    NOT NULL,
    os_build         text COLLATE "C"    NOT NULL,
    arch             text COLLATE "C"    NOT NULL,
    agent_version    text COLLATE "C"    NOT NULL,
    capability       integer NOT NULL,
    ips              text COLLATE "C"    NOT NULL DEFAULT '[]',   -- JSON array
    ring             text COLLATE "C"    REFERENCES rings(name),
    enroll_secret_id text COLLATE "C"    REFERENCES enroll_secrets(id),
    credential_hash  bytea   NOT NULL,                -- SHA-256 of the plat_ token
    enrolled_at      bigint  NOT NULL,
    last_seen_at     bigint  NOT NULL,
    inventory        text COLLATE "C"    NOT NULL DEFAULT '{"software":[],"pendingUpdates":[]}',
    feature_upgrade  text COLLATE "C"    NOT NULL DEFAULT 'none',
    feature_target   text COLLATE "C"    NOT NULL DEFAULT '',
    applied_policies text COLLATE "C"    NOT NULL DEFAULT '[]',   -- JSON array
    reboot_pending   boolean NOT NULL DEFAULT false,
    removed_at       bigint,
    -- 'manual' (by hand or by the enrollment secret) or 'rule'.
    ring_source      text COLLATE "C"    NOT NULL DEFAULT 'manual',
    -- agentproto.InventoryHash of the stored inventory, '' before the first.
    inventory_hash   text COLLATE "C"    NOT NULL DEFAULT ''
);

-- List order (hostname, id) over the agents that are not removed.
CREATE INDEX agents_list ON agents (hostname, id) WHERE removed_at IS NULL;
CREATE INDEX agents_ring ON agents (ring, hostname, id) WHERE removed_at IS NULL;

CREATE TABLE policies (
    id         text COLLATE "C"    PRIMARY KEY,
    name       text COLLATE "C"    NOT NULL UNIQUE,
    version    integer NOT NULL,
    created_at bigint  NOT NULL
);

-- Every version of every policy; policies.version is the current one.
CREATE TABLE policy_versions (
    policy_id  text COLLATE "C"    NOT NULL REFERENCES policies(id),
    version    integer NOT NULL,
    settings   text COLLATE "C"    NOT NULL,   -- JSON object
    created_by text COLLATE "C"    NOT NULL,
    created_at bigint  NOT NULL,
    PRIMARY KEY (policy_id, version)
);

CREATE TABLE rollouts (
    id             text COLLATE "C"    PRIMARY KEY,
    name           text COLLATE "C"    NOT NULL,
    kind           text COLLATE "C"    NOT NULL,
    params         text,                          -- JSON object of the commands
    policy_id      text COLLATE "C"    REFERENCES policies(id),
    policy_version integer,
    rings          text COLLATE "C"    NOT NULL,              -- JSON array of ring names, in order
    ring_index     integer NOT NULL DEFAULT -1,
    state          text COLLATE "C"    NOT NULL,
    created_by     text COLLATE "C"    NOT NULL,
    created_at     bigint  NOT NULL,
    updated_at     bigint  NOT NULL
);

CREATE INDEX rollouts_created ON rollouts (created_at, id);

-- The agents a rollout targets, when it targets some of its rings' agents.
CREATE TABLE rollout_agents (
    rollout_id text COLLATE "C" NOT NULL REFERENCES rollouts(id),
    agent_id   text COLLATE "C" NOT NULL,
    PRIMARY KEY (rollout_id, agent_id)
);

CREATE TABLE commands (
    -- seq is the order commands were queued in (SQLite's rowid): check-ins
    -- deliver the commands of one time in that order.
    seq          bigint  GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text COLLATE "C"    PRIMARY KEY,
    agent_id     text COLLATE "C"    NOT NULL REFERENCES agents(id),
    type         text COLLATE "C"    NOT NULL,
    state        text COLLATE "C"    NOT NULL,
    params       text,                            -- JSON object
    result       text,                            -- JSON of device.Result
    created_by   text COLLATE "C"    NOT NULL,
    created_at   bigint  NOT NULL,
    updated_at   bigint  NOT NULL,
    expires_at   bigint  NOT NULL,
    rollout_id   text COLLATE "C"    REFERENCES rollouts(id),
    rollout_ring text
);

-- Check-in: the queued commands of one agent, oldest first.
CREATE INDEX commands_agent ON commands (agent_id, state, created_at, seq);
-- Newest first, for the lists.
CREATE INDEX commands_created ON commands (created_at, id);
-- The expiry sweep over active commands.
CREATE INDEX commands_active ON commands (expires_at) WHERE state IN ('queued', 'delivered', 'running');
CREATE INDEX commands_rollout ON commands (rollout_id, rollout_ring, state) WHERE rollout_id IS NOT NULL;
-- Apply-policy commands not over, by policy: the pending count of a
-- policy's compliance.
CREATE INDEX commands_apply_policy ON commands (((params::jsonb) ->> 'policyId'))
    WHERE type = 'apply-policy' AND state IN ('queued', 'delivered', 'running');

CREATE TABLE log_bundles (
    command_id   text COLLATE "C"   PRIMARY KEY REFERENCES commands(id),
    agent_id     text COLLATE "C"   NOT NULL REFERENCES agents(id),
    content_type text COLLATE "C"   NOT NULL,
    size         bigint NOT NULL,
    sha256       bytea  NOT NULL,
    content      bytea  NOT NULL,
    created_at   bigint NOT NULL
);

-- The System Audit log, hash-chained (see internal/audit). Appends take an
-- advisory lock, so that replicas append one after the other.
CREATE TABLE audit_log (
    id             bigint  PRIMARY KEY,   -- 1, 2, 3 … set by the appender
    time           bigint  NOT NULL,
    actor          text COLLATE "C"    NOT NULL,
    key_id         text COLLATE "C"    NOT NULL DEFAULT '',
    action         text COLLATE "C"    NOT NULL,
    method         text COLLATE "C"    NOT NULL DEFAULT '',
    path           text COLLATE "C"    NOT NULL DEFAULT '',
    status         integer NOT NULL DEFAULT 0,
    client_address text COLLATE "C"    NOT NULL DEFAULT '',
    details        text,                  -- JSON of the event
    prev_hash      bytea   NOT NULL,
    hash           bytea   NOT NULL
);

CREATE INDEX audit_log_key ON audit_log (key_id, id) WHERE key_id <> '';
CREATE INDEX audit_log_action ON audit_log (action, id);

-- Append-only: the chain detects changes made past these triggers.
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END $$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- What each agent reports about each policy it applied, kept from
-- agents.applied_policies by the trigger below so that a policy's agents
-- are found without reading every agent.
CREATE TABLE agent_policies (
    policy_id text COLLATE "C"    NOT NULL,
    agent_id  text COLLATE "C"    NOT NULL REFERENCES agents(id),
    version   integer NOT NULL,
    compliant boolean,                    -- NULL when unknown
    message   text COLLATE "C"    NOT NULL DEFAULT '',
    PRIMARY KEY (policy_id, agent_id)
);

CREATE INDEX agent_policies_agent ON agent_policies (agent_id);

-- Check-ins rewrite applied_policies every time: the rows change only when
-- the JSON does.
CREATE FUNCTION agents_applied_policies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.applied_policies IS NOT DISTINCT FROM OLD.applied_policies THEN
            RETURN NULL;
        END IF;
        DELETE FROM agent_policies WHERE agent_id = NEW.id;
    ELSIF NEW.applied_policies = '[]' THEN
        RETURN NULL;
    END IF;
    INSERT INTO agent_policies (policy_id, agent_id, version, compliant, message)
        SELECT j ->> 'policyId', NEW.id, coalesce((j ->> 'version')::integer, 0),
               (j ->> 'compliant')::boolean, coalesce(j ->> 'message', '')
        FROM jsonb_array_elements(NEW.applied_policies::jsonb) j
        WHERE j ->> 'policyId' IS NOT NULL
        ON CONFLICT (policy_id, agent_id) DO UPDATE
            SET version = excluded.version, compliant = excluded.compliant, message = excluded.message;
    RETURN NULL;
END $$;

CREATE TRIGGER agents_applied_policies AFTER INSERT OR UPDATE OF applied_policies ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_applied_policies();

-- Endpoint exposure: which CVEs of the catalog affect each agent.

-- A token of a change: the evaluator takes an agent off the queue only if
-- no change queued it again meanwhile.
CREATE FUNCTION exposure_token() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT substr(md5(random()::text || clock_timestamp()::text), 1, 16)
$$;

CREATE TABLE exposure_queue (
    agent_id text COLLATE "C" PRIMARY KEY,
    token    text COLLATE "C" NOT NULL
);

-- Check-ins rewrite the inventory column only when the agent sent one; the
-- agent is queued only when what is stored changed. A removed agent is
-- exposed to nothing.
CREATE FUNCTION agents_exposure() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.removed_at IS NOT NULL AND OLD.removed_at IS NULL THEN
        DELETE FROM agent_products WHERE agent_id = NEW.id;
        INSERT INTO exposure_queue (agent_id, token) VALUES (NEW.id, 'removed')
            ON CONFLICT (agent_id) DO UPDATE SET token = excluded.token;
    ELSIF NEW.inventory IS DISTINCT FROM OLD.inventory AND NEW.removed_at IS NULL THEN
        INSERT INTO exposure_queue (agent_id, token) VALUES (NEW.id, exposure_token())
            ON CONFLICT (agent_id) DO UPDATE SET token = excluded.token;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER agents_exposure AFTER UPDATE OF inventory, removed_at ON agents
    FOR EACH ROW EXECUTE FUNCTION agents_exposure();

-- The findings of each agent: one row per CVE, catalog product and
-- inventory item. status is 'affected' or 'unknown'.
CREATE TABLE agent_vulnerabilities (
    agent_id   text COLLATE "C"   NOT NULL,
    cve_key    bigint NOT NULL,           -- cve.Key, for CVE id order
    cve_id     text COLLATE "C"   NOT NULL,
    ecosystem  text COLLATE "C"   NOT NULL,
    product    text COLLATE "C"   NOT NULL,
    package    text COLLATE "C"   NOT NULL,
    installed  text COLLATE "C"   NOT NULL,
    fixed      text COLLATE "C"   NOT NULL DEFAULT '',
    kb         text COLLATE "C"   NOT NULL DEFAULT '',
    status     text COLLATE "C"   NOT NULL,
    reason     text COLLATE "C"   NOT NULL DEFAULT '',
    eol_from   text COLLATE "C"   NOT NULL DEFAULT '',
    eoes_from  text COLLATE "C"   NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, cve_key, ecosystem, product, package, installed)
);

CREATE INDEX agent_vulnerabilities_cve ON agent_vulnerabilities (cve_key, agent_id);

-- The catalog products each agent holds (exposure.Key).
CREATE TABLE agent_products (
    product_key text COLLATE "C" NOT NULL,
    agent_id    text COLLATE "C" NOT NULL,
    PRIMARY KEY (product_key, agent_id)
);

CREATE INDEX agent_products_agent ON agent_products (agent_id);

-- The risk of the CVEs that name a fix. Missing scores are -1.
CREATE TABLE cve_risks (
    cve_key     bigint           PRIMARY KEY,
    cve_id      text COLLATE "C"             NOT NULL,
    kev         boolean          NOT NULL,
    epss        double precision NOT NULL,
    cvss        double precision NOT NULL,
    severity    text COLLATE "C"             NOT NULL DEFAULT '',
    description text COLLATE "C"             NOT NULL DEFAULT ''
);

CREATE INDEX cve_risks_order ON cve_risks (kev DESC, epss DESC, cvss DESC, cve_key);

-- Per CVE, how many agents are affected and how many only of unknown
-- status, kept by PutExposure.
CREATE TABLE cve_exposure (
    cve_key  bigint PRIMARY KEY,
    affected bigint NOT NULL,
    unknown  bigint NOT NULL
);

-- Per CVE, the fixed versions that apply to affected agents and how many
-- agents each applies to, kept by PutExposure.
CREATE TABLE cve_fixes (
    cve_key   bigint NOT NULL,
    ecosystem text COLLATE "C"   NOT NULL,
    product   text COLLATE "C"   NOT NULL,
    fixed     text COLLATE "C"   NOT NULL,
    kb        text COLLATE "C"   NOT NULL,
    eol_from  text COLLATE "C"   NOT NULL,
    agents    bigint NOT NULL,
    PRIMARY KEY (cve_key, ecosystem, product, fixed, kb, eol_from)
);
