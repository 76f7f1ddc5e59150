DROP TRIGGER loan_policy_unnamed ON loan_policy;
DROP FUNCTION loan_policy_unnamed();
DROP TRIGGER loan_policy_named_update ON loan;
DROP TRIGGER loan_policy_named_insert ON loan;
DROP FUNCTION loan_policy_named();
DROP INDEX loan_loan_policy_idx;
ALTER TABLE loan ADD CONSTRAINT loan_loan_policy_fkey FOREIGN KEY (tenant_id, loan_policy_id) REFERENCES loan_policy (tenant_id, id);
