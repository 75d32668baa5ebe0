-- Indexes that the PostgreSQL schema has had from its start, so that both
-- engines keep the same indexes: the order of the fleet's vulnerabilities
-- (exposure.FleetVulnerabilities) and the list of rollouts, newest first.
CREATE INDEX cve_risks_order ON cve_risks (kev DESC, epss DESC, cvss DESC, cve_key);
CREATE INDEX rollouts_created ON rollouts (created_at, id);
