-- Endpoint exposure: which CVEs of the catalog affect each agent.

-- Agents whose exposure must be evaluated again, with a token of the
-- change that queued them: the evaluator takes an agent off the queue only
-- if no change queued it again meanwhile.
CREATE TABLE exposure_queue (
    agent_id TEXT PRIMARY KEY,
    token    TEXT NOT NULL
) WITHOUT ROWID;

-- Check-ins rewrite the inventory column only when the agent sent one;
-- the agent is queued only when what is stored changed.
CREATE TRIGGER agents_inventory_exposure
AFTER UPDATE OF inventory ON agents
WHEN NEW.inventory IS NOT OLD.inventory AND NEW.removed_at IS NULL
BEGIN
    INSERT OR REPLACE INTO exposure_queue (agent_id, token) VALUES (NEW.id, hex(randomblob(8)));
END;

INSERT OR REPLACE INTO exposure_queue (agent_id, token)
    SELECT id, hex(randomblob(8)) FROM agents WHERE removed_at IS NULL;

-- The findings of each agent: one row per CVE, catalog product and
-- inventory item. status is 'affected' or 'unknown'.
CREATE TABLE agent_vulnerabilities (
    agent_id   TEXT    NOT NULL,
    cve_key    INTEGER NOT NULL,           -- cve.Key, for CVE id order
    cve_id     TEXT    NOT NULL,
    ecosystem  TEXT    NOT NULL,
    product    TEXT    NOT NULL,
    package    TEXT    NOT NULL,
    installed  TEXT    NOT NULL,
    fixed      TEXT    NOT NULL DEFAULT '',
    kb         TEXT    NOT NULL DEFAULT '',
    status     TEXT    NOT NULL,
    reason     TEXT    NOT NULL DEFAULT '',
    eol_from   TEXT    NOT NULL DEFAULT '',
    eoes_from  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (agent_id, cve_key, ecosystem, product, package, installed)
) WITHOUT ROWID;

CREATE INDEX agent_vulnerabilities_cve ON agent_vulnerabilities (cve_key, agent_id);


-- The catalog products each agent holds (exposure.Key), so that a change
-- of a product's atoms queues only the agents holding it.
CREATE TABLE agent_products (
    product_key TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    PRIMARY KEY (product_key, agent_id)
) WITHOUT ROWID;

CREATE INDEX agent_products_agent ON agent_products (agent_id);

-- The risk of the CVEs that name a fix, from the catalog: the order of
-- the vulnerability lists. Missing scores are -1.
CREATE TABLE cve_risks (
    cve_key     INTEGER PRIMARY KEY,
    cve_id      TEXT    NOT NULL,
    kev         INTEGER NOT NULL,
    epss        REAL    NOT NULL,
    cvss        REAL    NOT NULL,
    severity    TEXT    NOT NULL DEFAULT '',
    description TEXT    NOT NULL DEFAULT ''
);

-- Per CVE, how many agents are affected and how many only of unknown
-- status, kept by PutExposure: the fleet page reads it without grouping
-- every finding.
CREATE TABLE cve_exposure (
    cve_key  INTEGER PRIMARY KEY,
    affected INTEGER NOT NULL,
    unknown  INTEGER NOT NULL
);

-- Per CVE, the fixed versions that apply to affected agents and how many
-- agents each applies to, kept by PutExposure like cve_exposure.
CREATE TABLE cve_fixes (
    cve_key   INTEGER NOT NULL,
    ecosystem TEXT    NOT NULL,
    product   TEXT    NOT NULL,
    fixed     TEXT    NOT NULL,
    kb        TEXT    NOT NULL,
    eol_from  TEXT    NOT NULL,
    agents    INTEGER NOT NULL,
    PRIMARY KEY (cve_key, ecosystem, product, fixed, kb, eol_from)
) WITHOUT ROWID;

-- A removed agent is exposed to nothing.
CREATE TRIGGER agents_removed_exposure
AFTER UPDATE OF removed_at ON agents
WHEN NEW.removed_at IS NOT NULL AND OLD.removed_at IS NULL
BEGIN
    DELETE FROM exposure_queue WHERE agent_id = NEW.id;
    DELETE FROM agent_products WHERE agent_id = NEW.id;
    INSERT OR REPLACE INTO exposure_queue (agent_id, token) VALUES (NEW.id, 'removed');
END;

-- The agents a rollout targets, when it targets some of the agents of its
-- rings rather than all of them (installing the fix of a CVE on the agents
-- it affects).
CREATE TABLE rollout_agents (
    rollout_id TEXT NOT NULL REFERENCES rollouts(id),
    agent_id   TEXT NOT NULL,
    PRIMARY KEY (rollout_id, agent_id)
) WITHOUT ROWID;
