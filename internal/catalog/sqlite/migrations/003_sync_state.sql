-- The state of the upstream syncs, one row per source. Times are Unix
-- seconds, 0 for never. The row named '*lease' is the sync lease: the
-- replica named in holder may sync until lease_expires; its other columns
-- are unused, and the source columns of the other rows are unused by it.
CREATE TABLE sync_state (
    source          TEXT    PRIMARY KEY,
    last_attempt    INTEGER NOT NULL DEFAULT 0,
    last_success    INTEGER NOT NULL DEFAULT 0,
    cursor          TEXT    NOT NULL DEFAULT '', -- where the next sync resumes
    etag            TEXT    NOT NULL DEFAULT '', -- validators of conditional requests
    last_modified   TEXT    NOT NULL DEFAULT '',
    records_changed INTEGER NOT NULL DEFAULT 0,  -- by the last successful sync
    error           TEXT    NOT NULL DEFAULT '', -- of the last attempt
    failures        INTEGER NOT NULL DEFAULT 0,  -- consecutive failed attempts
    next_attempt    INTEGER NOT NULL DEFAULT 0,  -- earliest retry after a failure
    holder          TEXT    NOT NULL DEFAULT '', -- the lease row only
    lease_expires   INTEGER NOT NULL DEFAULT 0   -- the lease row only
) WITHOUT ROWID;
