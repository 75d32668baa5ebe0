-- The facts every source contributed, per CVE and upstream document.
CREATE TABLE facts (
    key  INTEGER NOT NULL,            -- cve.Key of the CVE id
    feed TEXT    NOT NULL,            -- cvelist, nvd, kev, epss, osv, ...
    doc  TEXT    NOT NULL DEFAULT '', -- upstream document within the feed
    body BLOB    NOT NULL,            -- JSON of cve.Facts
    PRIMARY KEY (key, feed, doc)
) WITHOUT ROWID;

-- Support windows of product releases (endoflife.date).
CREATE TABLE lifecycles (
    product TEXT NOT NULL,
    cycle   TEXT NOT NULL,
    body    BLOB NOT NULL,            -- JSON of cve.Lifecycle
    PRIMARY KEY (product, cycle)
) WITHOUT ROWID;

-- The merged, served records with the columns the list endpoint filters and
-- sorts on. Missing numbers are stored as -1 so that keyset conditions need
-- no NULL handling: they sort lowest.
CREATE TABLE records (
    key          INTEGER PRIMARY KEY, -- cve.Key: numeric (year, sequence) order
    cve_id       TEXT    NOT NULL,
    year         INTEGER NOT NULL,
    rejected     INTEGER NOT NULL,    -- 1 for state REJECTED
    severity     TEXT,                -- CRITICAL, HIGH, MEDIUM, LOW, NONE or NULL
    cvss         REAL    NOT NULL,    -- preferred base score, -1 when none
    cvss_version TEXT,                -- 2.0, 3.x, 4.0 or NULL
    epss         REAL    NOT NULL,    -- -1 when none
    is_kev       INTEGER NOT NULL,
    has_fix      INTEGER NOT NULL,
    published    INTEGER NOT NULL,    -- Unix seconds, -1 when unknown
    modified     INTEGER NOT NULL,    -- Unix seconds
    hash         BLOB    NOT NULL,    -- content hash, EPSS and modifiedAt left out
    body         BLOB    NOT NULL     -- JSON of cve.Record without _links
);

-- Full-text search over id and description; rowid is records.key.
CREATE VIRTUAL TABLE records_fts USING fts5(
    cve_id, description, content='', contentless_delete=1, tokenize='unicode61', prefix='2 3'
);

-- One row per ingest run, for the status page and `modifiedAt` auditing.
CREATE TABLE ingest_runs (
    id         INTEGER PRIMARY KEY,
    started    INTEGER NOT NULL,
    finished   INTEGER NOT NULL,
    sources    TEXT    NOT NULL,      -- JSON: per source counts
    changed    INTEGER NOT NULL       -- records added or changed
);
