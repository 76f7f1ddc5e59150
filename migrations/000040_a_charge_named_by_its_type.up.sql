-- A fee/fine's charge is named by its fee/fine type as stored: the type
-- the account's feeFineId names (which no replacement of the account can
-- change), not the free text of its feeFineType, which FOLIO's schema
-- does not require and which may name anything. An account written
-- without one is charged all the same, where migration 34's trigger
-- refused it (its charge had no typeAction); one whose feeFineType names
-- an action ("Paid fully") no longer makes its charge count as money
-- paid, which a refund could then give back.
CREATE OR REPLACE FUNCTION fee_fine_account_charged() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    action_id uuid := gen_random_uuid();
BEGIN
    INSERT INTO fee_fine_action (tenant_id, id, jsonb)
    VALUES (NEW.tenant_id, action_id, jsonb_strip_nulls(jsonb_build_object(
        'id', action_id, 'accountId', NEW.id, 'userId', NEW.user_id,
        'typeAction', (SELECT t.fee_fine_type FROM fee_fine_type t WHERE t.tenant_id = NEW.tenant_id AND t.id = NEW.fee_fine_id),
        'amountAction', NEW.amount, 'balance', NEW.remaining, 'dateAction', NEW.jsonb #> '{metadata,createdDate}',
        'source', NEW.jsonb -> 'chargedBy', 'createdAt', NEW.jsonb -> 'chargedAt',
        'notify', false, 'comments', NEW.jsonb -> 'chargeComment')));
    RETURN NULL;
END $$;
