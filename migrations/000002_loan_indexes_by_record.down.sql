DROP INDEX loan_one_open_loan_per_item, loan_open_by_user_idx, loan_user_id_idx, loan_item_id_idx;

CREATE UNIQUE INDEX loan_one_open_loan_per_item ON loan (tenant_id, item_id) WHERE status_name = 'Open';
CREATE INDEX loan_open_by_user_idx ON loan (tenant_id, user_id) WHERE status_name = 'Open';
CREATE INDEX loan_user_id_idx ON loan (tenant_id, user_id);
CREATE INDEX loan_item_id_idx ON loan (tenant_id, item_id);
