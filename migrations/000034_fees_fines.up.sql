-- Fees and fines, as FOLIO's mod-feesfines keeps them: owners (the desks
-- that own a fee/fine, by service point), fee/fine types (the four FOLIO
-- charges automatically have no owner), payment methods, overdue fine and
-- lost item fee policies (the circulation rules choose them as they
-- choose the loan policy), a patron's fee/fine (FOLIO's account: amount,
-- remaining, status, payment status, the loan and item it is for) and
-- each action on it (the charge, payments, waivers, transfers,
-- cancellations, refunds).
--
-- Amounts are numeric: the documents' JSON numbers are PostgreSQL's
-- numeric in jsonb, exact, never binary floats. An account's remaining is
-- never below zero nor above its amount, and it is open exactly while
-- something remains. Only the charge (with the account, by the trigger
-- below) and the actions of package feesfines change what an account
-- holds; every write of an account moves its version.
CREATE TABLE fee_fine_owner (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    owner     text GENERATED ALWAYS AS (jsonb ->> 'owner') STORED NOT NULL,
    CONSTRAINT fee_fine_owner_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT fee_fine_owner_owner_key UNIQUE (tenant_id, owner),
    CONSTRAINT fee_fine_owner_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE fee_fine_type (
    tenant_id     text NOT NULL,
    id            uuid NOT NULL,
    jsonb         jsonb NOT NULL,
    fee_fine_type text GENERATED ALWAYS AS (jsonb ->> 'feeFineType') STORED NOT NULL,
    owner_id      uuid GENERATED ALWAYS AS ((jsonb ->> 'ownerId')::uuid) STORED,
    automatic     boolean GENERATED ALWAYS AS ((jsonb ->> 'automatic')::boolean) STORED NOT NULL,
    CONSTRAINT fee_fine_type_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT fee_fine_type_name_key UNIQUE NULLS NOT DISTINCT (tenant_id, owner_id, fee_fine_type),
    CONSTRAINT fee_fine_type_owner_fkey FOREIGN KEY (tenant_id, owner_id) REFERENCES fee_fine_owner (tenant_id, id),
    CONSTRAINT fee_fine_type_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE payment_method (
    tenant_id   text NOT NULL,
    id          uuid NOT NULL,
    jsonb       jsonb NOT NULL,
    name_method text GENERATED ALWAYS AS (jsonb ->> 'nameMethod') STORED NOT NULL,
    owner_id    uuid GENERATED ALWAYS AS ((jsonb ->> 'ownerId')::uuid) STORED,
    CONSTRAINT payment_method_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT payment_method_name_key UNIQUE NULLS NOT DISTINCT (tenant_id, owner_id, name_method),
    CONSTRAINT payment_method_owner_fkey FOREIGN KEY (tenant_id, owner_id) REFERENCES fee_fine_owner (tenant_id, id),
    CONSTRAINT payment_method_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE overdue_fine_policy (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT overdue_fine_policy_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT overdue_fine_policy_name_key UNIQUE (tenant_id, name),
    CONSTRAINT overdue_fine_policy_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE lost_item_fee_policy (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT lost_item_fee_policy_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT lost_item_fee_policy_name_key UNIQUE (tenant_id, name),
    CONSTRAINT lost_item_fee_policy_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

-- The fee policies the circulation rules choose (FOLIO's o and i), beside
-- the rules rather than in their tables: a column added to the tables
-- every check-out reads would lock them until this migration commits.
CREATE TABLE circulation_rules_fee (
    tenant_id                       text NOT NULL,
    fallback_overdue_fine_policy_id uuid,
    fallback_lost_item_policy_id    uuid,
    CONSTRAINT circulation_rules_fee_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT circulation_rules_fallback_overdue_fine_policy_fkey
        FOREIGN KEY (tenant_id, fallback_overdue_fine_policy_id) REFERENCES overdue_fine_policy (tenant_id, id),
    CONSTRAINT circulation_rules_fallback_lost_item_policy_fkey
        FOREIGN KEY (tenant_id, fallback_lost_item_policy_id) REFERENCES lost_item_fee_policy (tenant_id, id),
    CONSTRAINT circulation_rules_fee_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE circulation_rule_fee (
    tenant_id              text NOT NULL,
    position               integer NOT NULL,
    overdue_fine_policy_id uuid,
    lost_item_policy_id    uuid,
    CONSTRAINT circulation_rule_fee_pkey PRIMARY KEY (tenant_id, position),
    CONSTRAINT circulation_rule_overdue_fine_policy_fkey
        FOREIGN KEY (tenant_id, overdue_fine_policy_id) REFERENCES overdue_fine_policy (tenant_id, id),
    CONSTRAINT circulation_rule_lost_item_policy_fkey
        FOREIGN KEY (tenant_id, lost_item_policy_id) REFERENCES lost_item_fee_policy (tenant_id, id),
    CONSTRAINT circulation_rule_fee_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE fee_fine_account (
    tenant_id   text NOT NULL,
    id          uuid NOT NULL,
    jsonb       jsonb NOT NULL,
    version     integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED NOT NULL,
    user_id     uuid GENERATED ALWAYS AS ((jsonb ->> 'userId')::uuid) STORED NOT NULL,
    loan_id     uuid GENERATED ALWAYS AS ((jsonb ->> 'loanId')::uuid) STORED,
    fee_fine_id uuid GENERATED ALWAYS AS ((jsonb ->> 'feeFineId')::uuid) STORED NOT NULL,
    owner_id    uuid GENERATED ALWAYS AS ((jsonb ->> 'ownerId')::uuid) STORED NOT NULL,
    amount      numeric GENERATED ALWAYS AS ((jsonb ->> 'amount')::numeric) STORED NOT NULL,
    remaining   numeric GENERATED ALWAYS AS ((jsonb ->> 'remaining')::numeric) STORED NOT NULL,
    status      text GENERATED ALWAYS AS (jsonb #>> '{status,name}') STORED NOT NULL,
    CONSTRAINT fee_fine_account_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT fee_fine_account_amount_check CHECK (amount > 0 AND scale(amount) <= 2),
    CONSTRAINT fee_fine_account_remaining_check CHECK (remaining >= 0 AND remaining <= amount AND scale(remaining) <= 2),
    CONSTRAINT fee_fine_account_status_check CHECK (status IN ('Open', 'Closed') AND (status = 'Open') = (remaining > 0)),
    CONSTRAINT fee_fine_account_user_fkey FOREIGN KEY (tenant_id, user_id) REFERENCES patron (tenant_id, id),
    CONSTRAINT fee_fine_account_fee_fine_fkey FOREIGN KEY (tenant_id, fee_fine_id) REFERENCES fee_fine_type (tenant_id, id),
    CONSTRAINT fee_fine_account_owner_fkey FOREIGN KEY (tenant_id, owner_id) REFERENCES fee_fine_owner (tenant_id, id)
);

-- A patron's balance: the open accounts' remaining, read by the block
-- judged in the check-out's write.
CREATE INDEX fee_fine_account_open_idx ON fee_fine_account (user_id, tenant_id) INCLUDE (remaining) WHERE status = 'Open';
CREATE INDEX fee_fine_account_loan_idx ON fee_fine_account (loan_id, tenant_id) WHERE loan_id IS NOT NULL;

CREATE TABLE fee_fine_action (
    tenant_id     text NOT NULL,
    id            uuid NOT NULL,
    jsonb         jsonb NOT NULL,
    account_id    uuid GENERATED ALWAYS AS ((jsonb ->> 'accountId')::uuid) STORED NOT NULL,
    user_id       uuid GENERATED ALWAYS AS ((jsonb ->> 'userId')::uuid) STORED NOT NULL,
    type_action   text GENERATED ALWAYS AS (jsonb ->> 'typeAction') STORED NOT NULL,
    amount_action numeric GENERATED ALWAYS AS ((jsonb ->> 'amountAction')::numeric) STORED NOT NULL,
    CONSTRAINT fee_fine_action_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT fee_fine_action_amount_check CHECK (amount_action >= 0 AND scale(amount_action) <= 2),
    CONSTRAINT fee_fine_action_account_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES fee_fine_account (tenant_id, id) ON DELETE CASCADE
);

CREATE INDEX fee_fine_action_account_idx ON fee_fine_action (account_id, tenant_id);
CREATE INDEX fee_fine_action_user_idx ON fee_fine_action (user_id, tenant_id);

-- Every write of an account moves its version, whoever writes it (as
-- migration 21 does for loans).
CREATE FUNCTION fee_fine_account_version_moves() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.jsonb := jsonb_set(NEW.jsonb, '{_version}', '1');
    ELSE
        NEW.jsonb := jsonb_set(NEW.jsonb, '{_version}', to_jsonb(OLD.version + 1));
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER fee_fine_account_version_moves BEFORE INSERT OR UPDATE ON fee_fine_account
    FOR EACH ROW EXECUTE FUNCTION fee_fine_account_version_moves();

-- An account is charged with its own action, in the transaction that
-- writes it: the charge, named by the fee/fine type, for the whole amount.
CREATE FUNCTION fee_fine_account_charged() RETURNS trigger
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

CREATE TRIGGER fee_fine_account_charged AFTER INSERT ON fee_fine_account
    FOR EACH ROW EXECUTE FUNCTION fee_fine_account_charged();

-- Fees and fines are announced as loans and items are (migration 9).
CREATE TRIGGER fee_fine_account_outbox AFTER INSERT OR UPDATE OR DELETE ON fee_fine_account
    FOR EACH ROW EXECUTE FUNCTION outbox_record('account');
CREATE TRIGGER fee_fine_action_outbox AFTER INSERT ON fee_fine_action
    FOR EACH ROW EXECUTE FUNCTION outbox_record('feefineaction');

-- FOLIO's automatic fee/fine types, which its circulation charges (mod-
-- feesfines' reference data), for every tenant, now and to come.
CREATE FUNCTION fee_fine_types_for(tenant text) RETURNS void
LANGUAGE sql SET search_path FROM CURRENT AS $$
    INSERT INTO fee_fine_type (tenant_id, id, jsonb)
    SELECT tenant, t.id::uuid, jsonb_build_object('id', t.id, 'feeFineType', t.name, 'automatic', true)
      FROM (VALUES ('9523cb96-e752-40c2-89da-60f3961a488d', 'Overdue fine'),
                   ('d20df2fb-45fd-4184-b238-0d25747ffdd9', 'Replacement processing fee'),
                   ('cf238f9f-7018-47b7-b815-bb2db798e19f', 'Lost item fee'),
                   ('c7dede15-aa48-45ed-860b-f996540180e0', 'Lost item processing fee')) AS t (id, name)
    ON CONFLICT DO NOTHING
$$;

SELECT fee_fine_types_for(id) FROM tenant;

CREATE FUNCTION tenant_fee_fine_types() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM fee_fine_types_for(NEW.id);
    RETURN NULL;
END $$;

CREATE TRIGGER tenant_fee_fine_types AFTER INSERT ON tenant
    FOR EACH ROW EXECUTE FUNCTION tenant_fee_fine_types();
