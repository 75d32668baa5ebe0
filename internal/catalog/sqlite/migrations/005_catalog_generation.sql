-- The catalog's generation: a random number that every change of a record
-- (its insert, its body or id updated, its removal) replaces, in the
-- transaction that makes the change, whatever program makes it. The body
-- store beside the catalog (package segments) names the generation it
-- holds, and is read only while the catalog is at that generation. A
-- random number, not a counter: a catalog rebuilt or restored from a
-- backup never comes back to a generation a store was written for.
CREATE TABLE catalog_generation (n INTEGER NOT NULL);
INSERT INTO catalog_generation VALUES (random());

CREATE TRIGGER records_generation_insert AFTER INSERT ON records
BEGIN UPDATE catalog_generation SET n = random(); END;
CREATE TRIGGER records_generation_update AFTER UPDATE OF cve_id, body ON records
BEGIN UPDATE catalog_generation SET n = random(); END;
CREATE TRIGGER records_generation_delete AFTER DELETE ON records
BEGIN UPDATE catalog_generation SET n = random(); END;
