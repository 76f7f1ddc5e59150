-- A loan names its loan policy, and every check-out of a tenant names one
-- of the tenant's few policies. As a foreign key, that reference had each
-- check-out's transaction lock the policy's row for key share until it
-- committed; two check-outs doing so at once make PostgreSQL record the
-- row's lockers as a MultiXact (900 of them for 1,000 check-outs of one
-- tenant, eight at a time): extra I/O, contention on its caches and
-- anti-wraparound vacuums, the known cliff of a hot parent row. The same
-- integrity now takes no lock a check-out shares:
--
--   - a loan written (created, or changed to name another policy) must name
--     a policy of its tenant: read, not locked, in the write's transaction;
--   - a policy that a loan names is not deleted. The deletion first takes
--     the loan table in share mode, so the loan writes under way finish
--     before it looks, and those that follow wait for it and then find the
--     policy gone. A tenant's purge, which deletes its loans first, does
--     not take it (checkoutlock.purge).
--
-- Both refusals are the foreign key's as before (SQLSTATE 23503, its
-- constraint's name).
ALTER TABLE loan DROP CONSTRAINT loan_loan_policy_fkey;
CREATE INDEX loan_loan_policy_idx ON loan (loan_policy_id, tenant_id);

CREATE FUNCTION loan_policy_named() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- (A BEFORE trigger sees the document, not the generated column.)
    IF NOT EXISTS (SELECT 1 FROM loan_policy p WHERE p.tenant_id = NEW.tenant_id AND p.id = (NEW.jsonb ->> 'loanPolicyId')::uuid) THEN
        RAISE EXCEPTION 'insert or update on table "loan" violates foreign key constraint "loan_loan_policy_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'loan_loan_policy_fkey', TABLE = 'loan',
                  DETAIL = format('Key (tenant_id, loan_policy_id)=(%s, %s) is not present in table "loan_policy".', NEW.tenant_id, NEW.jsonb ->> 'loanPolicyId');
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER loan_policy_named_insert BEFORE INSERT ON loan
    FOR EACH ROW WHEN ((NEW.jsonb ->> 'loanPolicyId') IS NOT NULL) EXECUTE FUNCTION loan_policy_named();
CREATE TRIGGER loan_policy_named_update BEFORE UPDATE ON loan
    FOR EACH ROW WHEN ((NEW.jsonb ->> 'loanPolicyId') IS NOT NULL AND (NEW.jsonb ->> 'loanPolicyId') IS DISTINCT FROM (OLD.jsonb ->> 'loanPolicyId'))
    EXECUTE FUNCTION loan_policy_named();

CREATE FUNCTION loan_policy_unnamed() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('checkoutlock.purge', true) IS DISTINCT FROM 'on' THEN
        LOCK TABLE loan IN SHARE MODE;
    END IF;
    IF EXISTS (SELECT 1 FROM loan l WHERE l.loan_policy_id = OLD.id AND l.tenant_id = OLD.tenant_id) THEN
        RAISE EXCEPTION 'update or delete on table "loan_policy" violates foreign key constraint "loan_loan_policy_fkey" on table "loan"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'loan_loan_policy_fkey', TABLE = 'loan',
                  DETAIL = format('Key (tenant_id, id)=(%s, %s) is still referenced from table "loan".', OLD.tenant_id, OLD.id);
    END IF;
    RETURN OLD;
END
$$;
CREATE TRIGGER loan_policy_unnamed BEFORE DELETE ON loan_policy
    FOR EACH ROW EXECUTE FUNCTION loan_policy_unnamed();
