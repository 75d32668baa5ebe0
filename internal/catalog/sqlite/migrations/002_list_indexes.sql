-- Keyset pagination of the list endpoint: one index per sort key, each ending
-- with key (the tie-breaker), so that a page starts with one seek to
-- (sort value, key) wherever it lies in the catalog. The filter columns follow,
-- so that filters are checked inside the index and only the rows of the page
-- are read from the table. Rejected records are never listed and are left out.
CREATE INDEX records_list_published ON records (published, key, severity, is_kev, has_fix, epss, year) WHERE rejected = 0;
CREATE INDEX records_list_epss      ON records (epss, key, severity, is_kev, has_fix, year)             WHERE rejected = 0;
CREATE INDEX records_list_cvss      ON records (cvss, key, severity, is_kev, has_fix, epss, year)       WHERE rejected = 0;
CREATE INDEX records_list_has_fix   ON records (has_fix, key, severity, is_kev, epss, year)             WHERE rejected = 0;
CREATE INDEX records_list_is_kev    ON records (is_kev, key, severity, has_fix, epss, year)             WHERE rejected = 0;
CREATE INDEX records_list_key       ON records (key, severity, is_kev, has_fix, epss, year)             WHERE rejected = 0;
