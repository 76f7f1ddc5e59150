-- A loan's anonymization is announced without the borrower it forgot: its
-- event's old document lacks userId and borrower as its new one does
-- (a loan that named a borrower and names none now). Every other event is
-- recorded as before.
CREATE OR REPLACE FUNCTION outbox_record() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    old_doc jsonb;
BEGIN
    IF coalesce(current_setting('checkoutlock.outbox', true), '') = 'off' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (NEW.tenant_id, TG_ARGV[0], 'CREATED', jsonb_build_object('old', NULL, 'new', NEW.jsonb));
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (OLD.tenant_id, TG_ARGV[0], 'DELETED', jsonb_build_object('old', OLD.jsonb, 'new', NULL));
    ELSIF OLD.jsonb IS DISTINCT FROM NEW.jsonb
          AND (TG_ARGV[0] <> 'item' OR (OLD.jsonb #>> '{status,name}') IS DISTINCT FROM (NEW.jsonb #>> '{status,name}')) THEN
        old_doc := OLD.jsonb;
        IF TG_ARGV[0] = 'loan' AND OLD.jsonb ? 'userId' AND NOT NEW.jsonb ? 'userId' THEN
            old_doc := old_doc - 'userId' - 'borrower';
        END IF;
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (NEW.tenant_id, TG_ARGV[0], 'UPDATED', jsonb_build_object('old', old_doc, 'new', NEW.jsonb));
    END IF;
    RETURN NULL;
END $$;
