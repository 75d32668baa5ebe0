-- Alert rules: what an administrator wants to be told of, and the
-- webhook that tells them. threshold is the EPSS or CVSS score at or
-- above which a CVE alerts, or for kev-due the days before a KEV due date.
CREATE TABLE alert_rules (
    id          TEXT    PRIMARY KEY,
    name        TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    threshold   REAL    NOT NULL,
    webhook_url TEXT    NOT NULL,
    secret      TEXT    NOT NULL,
    created_by  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);

-- Alerts: one CVE that met a rule on the agents it names (in body, the
-- JSON the webhook receives), with where its delivery stands.
CREATE TABLE alerts (
    id           TEXT    PRIMARY KEY,
    rule_id      TEXT    NOT NULL,
    cve_id       TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    next_attempt INTEGER,
    delivered_at INTEGER
);
CREATE INDEX alerts_created ON alerts (created_at, id);
CREATE INDEX alerts_due ON alerts (state, next_attempt);

-- What each rule has alerted of: an agent is named once per rule and CVE.
CREATE TABLE alert_seen (
    rule_id  TEXT    NOT NULL,
    cve_key  INTEGER NOT NULL,
    agent_id TEXT    NOT NULL,
    PRIMARY KEY (rule_id, cve_key, agent_id)
) WITHOUT ROWID;

-- Every attempt to deliver an alert: the webhook's status, or why it
-- could not be reached.
CREATE TABLE alert_deliveries (
    alert_id TEXT    NOT NULL,
    attempt  INTEGER NOT NULL,
    at       INTEGER NOT NULL,
    status   INTEGER NOT NULL,
    error    TEXT    NOT NULL,
    PRIMARY KEY (alert_id, attempt)
) WITHOUT ROWID;
