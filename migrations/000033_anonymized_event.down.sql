-- An anonymization's event names the borrower in its old document again.
CREATE OR REPLACE FUNCTION outbox_record() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (NEW.tenant_id, TG_ARGV[0], 'UPDATED', jsonb_build_object('old', OLD.jsonb, 'new', NEW.jsonb));
    END IF;
    RETURN NULL;
END $$;
