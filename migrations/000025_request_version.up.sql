-- Requests take optimistic locking, as loans and items do. A request is
-- replaced by a librarian's change, a move and a cancellation, each
-- deciding from the request it read; each now names the request's
-- "_version" it read and is refused when another write came first (a
-- check-out that filled it, a check-in that put its item on the hold shelf
-- with an expiry date, a request ahead of it that left the queue), so no
-- two writes of a request undo each other.
--
-- Every change of a request moves its version, whoever writes it (the
-- queue's shifts, the check-out's and the check-in's statements, a write
-- in SQL): a request inserted without one is version 1, and an update that
-- leaves the version as it was moves it one on. Loans and requests share
-- the one function that does it.
--
-- Requests written before this migration are given version 1. Their stamp
-- is not a change of the request: the outbox's trigger, and every other
-- trigger of the table's own, stay off while it is written.
CREATE FUNCTION record_version_moves() RETURNS trigger
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

DROP TRIGGER loan_version_moves ON loan;
DROP FUNCTION loan_version_moves();
CREATE TRIGGER loan_version_moves BEFORE INSERT OR UPDATE ON loan
    FOR EACH ROW EXECUTE FUNCTION record_version_moves();

ALTER TABLE request DISABLE TRIGGER USER;
UPDATE request SET jsonb = jsonb || '{"_version": 1}' WHERE NOT jsonb ? '_version';
ALTER TABLE request ENABLE TRIGGER USER;
ALTER TABLE request ADD COLUMN version integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED NOT NULL;
-- Generated columns are computed after BEFORE triggers: the version
-- column follows the stamp.
CREATE TRIGGER request_version_moves BEFORE INSERT OR UPDATE ON request
    FOR EACH ROW EXECUTE FUNCTION record_version_moves();
