-- The head of the audit chain, read once the lock of appends (the advisory
-- lock whose key is given) is granted: what an append reads before it
-- writes, in one round trip rather than two. The function is VOLATILE, so
-- its query takes its snapshot after the lock is granted and sees the
-- append that held the lock before. No row when the log is empty.
CREATE FUNCTION audit_head(lock_key bigint) RETURNS TABLE (id bigint, hash bytea)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(lock_key);
    RETURN QUERY SELECT a.id, a.hash FROM audit_log a ORDER BY a.id DESC LIMIT 1;
END
$$;
