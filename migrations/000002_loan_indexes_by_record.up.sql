-- A loan is looked up by its item or its borrower, within the tenant. The
-- indexes that serve those lookups lead with the record's id and end with
-- the tenant: an index that led with the tenant would also match a
-- condition on the tenant alone, and a plan made for every tenant at once
-- (a prepared statement's generic plan) can pick it and walk all the
-- tenant's open loans to find one item's. The uniqueness is the same.
DROP INDEX loan_one_open_loan_per_item, loan_open_by_user_idx, loan_user_id_idx, loan_item_id_idx;

-- One open loan per item, whoever races to create it.
CREATE UNIQUE INDEX loan_one_open_loan_per_item ON loan (item_id, tenant_id) WHERE status_name = 'Open';
-- The item-limit count reads a patron's open loans.
CREATE INDEX loan_open_by_user_idx ON loan (user_id, tenant_id) WHERE status_name = 'Open';
CREATE INDEX loan_user_id_idx ON loan (user_id, tenant_id);
CREATE INDEX loan_item_id_idx ON loan (item_id, tenant_id);
