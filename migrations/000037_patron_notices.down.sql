-- The tenants' views of the tables this migration added, and of those it
-- added columns to, go with them (a tenant's upgrade makes them again).
DROP TRIGGER fee_fine_account_notice_change ON fee_fine_account;
DROP TRIGGER request_notice_change ON request;
DROP TRIGGER loan_notice_change ON loan;
DROP FUNCTION notice_change_record();
DROP FUNCTION notice_event(text, jsonb, jsonb);
DROP TABLE notice_change CASCADE;
DROP TABLE scheduled_notice CASCADE;
ALTER TABLE circulation_rules_fee DROP COLUMN fallback_notice_policy_id CASCADE;
ALTER TABLE circulation_rule_fee DROP COLUMN notice_policy_id CASCADE;
DROP TABLE notice_template CASCADE;
DROP TABLE patron_notice_policy CASCADE;
