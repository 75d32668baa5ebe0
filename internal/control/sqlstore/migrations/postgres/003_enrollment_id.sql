-- The agent's own id of the enrollment request that created it, so that a
-- request sent again (its answer lost to a timeout) answers the same agent
-- instead of making another. NULL for agents enrolled before.
ALTER TABLE agents ADD COLUMN enrollment_id text COLLATE "C";
CREATE UNIQUE INDEX agents_enrollment_id ON agents (enrollment_id) WHERE enrollment_id IS NOT NULL;
