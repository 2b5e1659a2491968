-- Wake the harvester when rows are committed: one notification per inserting statement,
-- delivered at commit (and folded by Postgres within a transaction).
CREATE OR REPLACE FUNCTION {{notify_fn}}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{{channel}}', '');
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {{notify_trigger}} ON {{outbox}};
CREATE TRIGGER {{notify_trigger}} AFTER INSERT ON {{outbox}}
    FOR EACH STATEMENT EXECUTE FUNCTION {{notify_fn}}();
