-- The catalog's version: a random number that every statement changing
-- its records, facts, lifecycles or ingest runs replaces, in its
-- transaction, whatever program runs it; every ingest or sync run logs
-- itself in ingest_runs, so each commit of one changes it. Each serve
-- replica keeps its summary index of lists and walks, the catalog's
-- counts and the renditions of its streams for as long as the catalog
-- keeps the version they were read at, and asks for it before using them.
-- A random number, not a counter: a catalog restored from a backup never
-- comes back to a version something was read at. (SQLite's PRAGMA
-- data_version says the same of a catalog file.)
CREATE TABLE catalog_version (n bigint NOT NULL);
INSERT INTO catalog_version VALUES ((random() * 9e18)::bigint);

-- The function keeps the search_path of the migration, so that a statement
-- of a session with another one (psql, with the tables named by schema)
-- finds catalog_version too.
CREATE FUNCTION catalog_version_new() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE catalog_version SET n = (random() * 9e18)::bigint;
	RETURN NULL;
END
$$;

CREATE TRIGGER records_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON records
	FOR EACH STATEMENT EXECUTE FUNCTION catalog_version_new();
CREATE TRIGGER facts_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON facts
	FOR EACH STATEMENT EXECUTE FUNCTION catalog_version_new();
CREATE TRIGGER lifecycles_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON lifecycles
	FOR EACH STATEMENT EXECUTE FUNCTION catalog_version_new();
CREATE TRIGGER ingest_runs_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ingest_runs
	FOR EACH STATEMENT EXECUTE FUNCTION catalog_version_new();
