-- Alert rules: what an administrator wants to be told of, and the
-- webhook that tells them. threshold is the EPSS or CVSS score at or
-- above which a CVE alerts, or for kev-due the days before a KEV due date.
CREATE TABLE alert_rules (
    id          text COLLATE "C" PRIMARY KEY,
    name        text COLLATE "C" NOT NULL,
    kind        text COLLATE "C" NOT NULL,
    threshold   double precision NOT NULL,
    webhook_url text COLLATE "C" NOT NULL,
    secret      text COLLATE "C" NOT NULL,
    created_by  text COLLATE "C" NOT NULL,
    created_at  bigint           NOT NULL
);

-- Alerts: one CVE that met a rule on the agents it names (in body, the
-- JSON the webhook receives), with where its delivery stands.
CREATE TABLE alerts (
    id           text COLLATE "C" PRIMARY KEY,
    rule_id      text COLLATE "C" NOT NULL,
    cve_id       text COLLATE "C" NOT NULL,
    body         text COLLATE "C" NOT NULL,
    created_at   bigint           NOT NULL,
    state        text COLLATE "C" NOT NULL,
    attempts     integer          NOT NULL,
    next_attempt bigint,
    delivered_at bigint
);
CREATE INDEX alerts_created ON alerts (created_at, id);
CREATE INDEX alerts_due ON alerts (state, next_attempt);

-- What each rule has alerted of: an agent is named once per rule and CVE.
CREATE TABLE alert_seen (
    rule_id  text COLLATE "C" NOT NULL,
    cve_key  bigint           NOT NULL,
    agent_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (rule_id, cve_key, agent_id)
);

-- Every attempt to deliver an alert: the webhook's status, or why it
-- could not be reached.
CREATE TABLE alert_deliveries (
    alert_id text COLLATE "C" NOT NULL,
    attempt  integer          NOT NULL,
    at       bigint           NOT NULL,
    status   integer          NOT NULL,
    error    text COLLATE "C" NOT NULL,
    PRIMARY KEY (alert_id, attempt)
);
