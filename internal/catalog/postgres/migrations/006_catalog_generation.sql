-- The catalog's generation, as on SQLite (its migration 005): a random
-- number that every statement changing the records replaces, in its
-- transaction, whatever program runs it. Each replica keeps its summary
-- index of lists and walks for as long as the catalog keeps the
-- generation it was read at: an ingest or sync run that changes no record
-- changes catalog_version (its run, its facts), not this, and builds no
-- new index.
CREATE TABLE catalog_generation (n bigint NOT NULL);
INSERT INTO catalog_generation VALUES ((random() * 9e18)::bigint);

CREATE FUNCTION catalog_generation_new() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	UPDATE catalog_generation SET n = (random() * 9e18)::bigint;
	RETURN NULL;
END
$$;

CREATE TRIGGER records_generation AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON records
	FOR EACH STATEMENT EXECUTE FUNCTION catalog_generation_new();
