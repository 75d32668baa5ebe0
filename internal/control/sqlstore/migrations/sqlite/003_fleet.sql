-- Ring rules, inventory deltas and policy compliance.

-- The rule of a ring: JSON of device.RingRule, NULL for none.
ALTER TABLE rings ADD COLUMN rule TEXT;

-- How an agent got its ring: 'manual' (by hand or by its enrollment
-- secret) or 'rule' (chosen by the ring rules). Agents already in a ring
-- keep it as if set by hand; the others follow the rules.
ALTER TABLE agents ADD COLUMN ring_source TEXT NOT NULL DEFAULT 'manual';
UPDATE agents SET ring_source = 'rule' WHERE ring IS NULL;

-- agentproto.InventoryHash of the stored inventory as the agent reported
-- it: the base of its next inventory delta. '' before the first report.
ALTER TABLE agents ADD COLUMN inventory_hash TEXT NOT NULL DEFAULT '';

-- What each agent reports about each policy it applied, kept from
-- agents.applied_policies by the triggers below so that a policy's agents
-- are found without reading every agent.
CREATE TABLE agent_policies (
    policy_id TEXT    NOT NULL,
    agent_id  TEXT    NOT NULL REFERENCES agents(id),
    version   INTEGER NOT NULL,
    compliant INTEGER,                    -- 1, 0, or NULL when unknown
    message   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (policy_id, agent_id)
) WITHOUT ROWID;

CREATE INDEX agent_policies_agent ON agent_policies (agent_id);

INSERT OR REPLACE INTO agent_policies (policy_id, agent_id, version, compliant, message)
    SELECT json_extract(j.value, '$.policyId'), a.id, coalesce(json_extract(j.value, '$.version'), 0),
           json_extract(j.value, '$.compliant'), coalesce(json_extract(j.value, '$.message'), '')
    FROM agents a, json_each(a.applied_policies) j
    WHERE json_extract(j.value, '$.policyId') IS NOT NULL;

-- Check-ins rewrite applied_policies every time: the rows change only when
-- the JSON does.
CREATE TRIGGER agents_applied_policies_update
AFTER UPDATE OF applied_policies ON agents
WHEN NEW.applied_policies IS NOT OLD.applied_policies
BEGIN
    DELETE FROM agent_policies WHERE agent_id = NEW.id;
    INSERT OR REPLACE INTO agent_policies (policy_id, agent_id, version, compliant, message)
        SELECT json_extract(value, '$.policyId'), NEW.id, coalesce(json_extract(value, '$.version'), 0),
               json_extract(value, '$.compliant'), coalesce(json_extract(value, '$.message'), '')
        FROM json_each(NEW.applied_policies)
        WHERE json_extract(value, '$.policyId') IS NOT NULL;
END;

CREATE TRIGGER agents_applied_policies_insert
AFTER INSERT ON agents
WHEN NEW.applied_policies != '[]'
BEGIN
    INSERT OR REPLACE INTO agent_policies (policy_id, agent_id, version, compliant, message)
        SELECT json_extract(value, '$.policyId'), NEW.id, coalesce(json_extract(value, '$.version'), 0),
               json_extract(value, '$.compliant'), coalesce(json_extract(value, '$.message'), '')
        FROM json_each(NEW.applied_policies)
        WHERE json_extract(value, '$.policyId') IS NOT NULL;
END;

-- Apply-policy commands not over, by policy: the pending count of a
-- policy's compliance.
CREATE INDEX commands_apply_policy ON commands (json_extract(params, '$.policyId'))
    WHERE type = 'apply-policy' AND state IN ('queued', 'delivered', 'running');
