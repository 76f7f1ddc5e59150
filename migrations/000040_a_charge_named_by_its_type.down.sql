-- fee_fine_account_charged as migration 34 made it: the charge named by
-- the account's feeFineType.
CREATE OR REPLACE FUNCTION fee_fine_account_charged() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    action_id uuid := gen_random_uuid();
BEGIN
    INSERT INTO fee_fine_action (tenant_id, id, jsonb)
    VALUES (NEW.tenant_id, action_id, jsonb_strip_nulls(jsonb_build_object(
        'id', action_id, 'accountId', NEW.id, 'userId', NEW.user_id, 'typeAction', NEW.jsonb ->> 'feeFineType',
        'amountAction', NEW.amount, 'balance', NEW.remaining, 'dateAction', NEW.jsonb #> '{metadata,createdDate}',
        'source', NEW.jsonb -> 'chargedBy', 'createdAt', NEW.jsonb -> 'chargedAt',
        'notify', false, 'comments', NEW.jsonb -> 'chargeComment')));
    RETURN NULL;
END $$;
