-- The facts every source contributed, per CVE and upstream document.
CREATE TABLE facts (
    key  bigint NOT NULL,             -- cve.Key of the CVE id
    feed text   NOT NULL,             -- cvelist, nvd, kev, epss, osv, ...
    doc  text   NOT NULL DEFAULT '',  -- upstream document within the feed
    body bytea  NOT NULL,             -- JSON of cve.Facts, byte for byte
    PRIMARY KEY (key, feed, doc)
);

-- Support windows of product releases (endoflife.date).
CREATE TABLE lifecycles (
    product text  NOT NULL,
    cycle   text  NOT NULL,
    body    bytea NOT NULL,           -- JSON of cve.Lifecycle
    PRIMARY KEY (product, cycle)
);

-- The merged, served records with the columns the list endpoint filters and
-- sorts on. Missing numbers are stored as -1 so that keyset conditions need
-- no NULL handling: they sort lowest.
CREATE TABLE records (
    key          bigint           PRIMARY KEY, -- cve.Key: numeric (year, sequence) order
    cve_id       text             NOT NULL,
    year         integer          NOT NULL,
    rejected     boolean          NOT NULL,    -- state REJECTED
    severity     text,                         -- CRITICAL, HIGH, MEDIUM, LOW, NONE or NULL
    cvss         double precision NOT NULL,    -- preferred base score, -1 when none
    cvss_version text,                         -- 2.0, 3.x, 4.0 or NULL
    epss         double precision NOT NULL,    -- -1 when none
    is_kev       boolean          NOT NULL,
    has_fix      boolean          NOT NULL,
    published    bigint           NOT NULL,    -- Unix seconds, -1 when unknown
    modified     bigint           NOT NULL,    -- Unix seconds
    hash         bytea            NOT NULL,    -- content hash, EPSS and modifiedAt left out
    body         bytea            NOT NULL,    -- JSON of cve.Record without _links
    -- Full-text search over id and description: the words (runs of letters
    -- and digits, folded) built by the store, the id's first, then a gap, so
    -- that a phrase never spans the two.
    search       tsvector         NOT NULL
);

-- One row per ingest run, for the status page and `modifiedAt` auditing.
CREATE TABLE ingest_runs (
    id       bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started  bigint  NOT NULL,
    finished bigint  NOT NULL,
    sources  text    NOT NULL,        -- JSON: per source counts
    changed  integer NOT NULL         -- records added or changed
);
