-- Lists are answered by the summary index in memory (catalog.Summaries),
-- never by SQL: the indexes of the sort orders go, and each write of a
-- record maintains five indexes fewer. records_list_key stays: the
-- summary index reads the keys of the listed records from it.
DROP INDEX records_list_published;
DROP INDEX records_list_epss;
DROP INDEX records_list_cvss;
DROP INDEX records_list_has_fix;
DROP INDEX records_list_is_kev;
