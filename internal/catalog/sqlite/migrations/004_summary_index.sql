-- A covering index for walks of the catalog in id order (bulk.jsonl, the
-- modification feed, the exposure index): the summary columns without the
-- record bodies, so that a walk of the whole catalog reads the index's
-- megabytes instead of the gigabytes of the table.
CREATE INDEX records_summary ON records (key, cve_id, severity, cvss, cvss_version, epss, is_kev, has_fix, published, modified);
