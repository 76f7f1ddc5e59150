-- A loan names the service points it was checked out and in at; each must
-- be one of its tenant's service points when it is written (a check-out,
-- a check-in, any write that names another). Like the loan policy
-- (migration 14), the service point is read, not locked: a foreign key
-- would have every check-out of a tenant lock its desk's row, a hot row.
-- A service point loans name may still be removed: the loans keep its id,
-- as FOLIO's do.
CREATE FUNCTION loan_service_points_exist() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    field text;
BEGIN
    FOREACH field IN ARRAY ARRAY['checkoutServicePointId', 'checkinServicePointId'] LOOP
        IF (NEW.jsonb ->> field) IS NOT NULL
           AND (TG_OP = 'INSERT' OR (NEW.jsonb ->> field) IS DISTINCT FROM (OLD.jsonb ->> field))
           AND NOT EXISTS (SELECT 1 FROM service_point s WHERE s.tenant_id = NEW.tenant_id AND s.id = (NEW.jsonb ->> field)::uuid) THEN
            RAISE EXCEPTION 'insert or update on table "loan" violates foreign key constraint "loan_%_fkey"', field
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'loan_' || field || '_fkey', TABLE = 'loan',
                      DETAIL = format('Key (tenant_id, %s)=(%s, %s) is not present in table "service_point".', field, NEW.tenant_id, NEW.jsonb ->> field);
        END IF;
    END LOOP;
    RETURN NEW;
END
$$;
CREATE TRIGGER loan_service_points_exist BEFORE INSERT OR UPDATE ON loan
    FOR EACH ROW WHEN ((NEW.jsonb ->> 'checkoutServicePointId') IS NOT NULL OR (NEW.jsonb ->> 'checkinServicePointId') IS NOT NULL)
    EXECUTE FUNCTION loan_service_points_exist();
