-- The state of the upstream syncs, one row per source. Times are Unix
-- seconds, 0 for never. The row named '*lease' is the sync lease: the
-- replica named in holder may sync until lease_expires; its other columns
-- are unused, and the source columns of the other rows are unused by it.
CREATE TABLE sync_state (
    source          text    PRIMARY KEY,
    last_attempt    bigint  NOT NULL DEFAULT 0,
    last_success    bigint  NOT NULL DEFAULT 0,
    cursor          text    NOT NULL DEFAULT '', -- where the next sync resumes
    etag            text    NOT NULL DEFAULT '', -- validators of conditional requests
    last_modified   text    NOT NULL DEFAULT '',
    records_changed integer NOT NULL DEFAULT 0,  -- by the last successful sync
    error           text    NOT NULL DEFAULT '', -- of the last attempt
    failures        integer NOT NULL DEFAULT 0,  -- consecutive failed attempts
    next_attempt    bigint  NOT NULL DEFAULT 0,  -- earliest retry after a failure
    holder          text    NOT NULL DEFAULT '', -- the lease row only
    lease_expires   bigint  NOT NULL DEFAULT 0   -- the lease row only
);
