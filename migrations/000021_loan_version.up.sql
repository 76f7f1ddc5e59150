-- Loans take optimistic locking, as items do. A loan is written by a
-- check-out, a check-in, a renewal, a claim returned and a declare lost,
-- each deciding from the loan it read; each write now names the loan's
-- "_version" it read and is refused when another write came first, so no
-- two writes of a loan undo each other (a claim returned could replace a
-- loan renewed a moment before with the copy it read, unrenewed).
--
-- Every change of a loan moves its version, whoever writes it: a loan
-- inserted without one (an import, a seed in SQL) is version 1, and an
-- update that leaves the version as it was (a write in SQL) moves it one
-- on, so that a write made at the version read before it is refused.
--
-- Loans written before this migration are given version 1. Their stamp is
-- not a change of the loan: the outbox's trigger, and every other trigger
-- of the table's own, stay off while it is written.
ALTER TABLE loan DISABLE TRIGGER USER;
UPDATE loan SET jsonb = jsonb || '{"_version": 1}' WHERE NOT jsonb ? '_version';
ALTER TABLE loan ENABLE TRIGGER USER;
ALTER TABLE loan ADD COLUMN version integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED NOT NULL;

CREATE FUNCTION loan_version_moves() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NOT NEW.jsonb ? '_version' THEN
            NEW.jsonb := NEW.jsonb || '{"_version": 1}';
        END IF;
    ELSIF NOT NEW.jsonb ? '_version' OR (NEW.jsonb -> '_version') = (OLD.jsonb -> '_version') THEN
        NEW.jsonb := jsonb_set(NEW.jsonb, '{_version}', to_jsonb(OLD.version + 1));
    END IF;
    RETURN NEW;
END $$;
-- Generated columns are computed after BEFORE triggers: the version
-- column follows the stamp.
CREATE TRIGGER loan_version_moves BEFORE INSERT OR UPDATE ON loan
    FOR EACH ROW EXECUTE FUNCTION loan_version_moves();
