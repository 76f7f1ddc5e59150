DROP TRIGGER request_version_moves ON request;
ALTER TABLE request DROP COLUMN version;
ALTER TABLE request DISABLE TRIGGER USER;
UPDATE request SET jsonb = jsonb - '_version';
ALTER TABLE request ENABLE TRIGGER USER;

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
DROP TRIGGER loan_version_moves ON loan;
CREATE TRIGGER loan_version_moves BEFORE INSERT OR UPDATE ON loan
    FOR EACH ROW EXECUTE FUNCTION loan_version_moves();
DROP FUNCTION record_version_moves();
