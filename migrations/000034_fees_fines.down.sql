-- The tenants' views of the tables and columns this migration added (and
-- of circulation_rule and circulation_rules, whose columns it added) go
-- with them; the release before creates its views again when a tenant is
-- enabled or upgraded.
DROP TRIGGER tenant_fee_fine_types ON tenant;
DROP FUNCTION tenant_fee_fine_types();
DROP FUNCTION fee_fine_types_for(text);
DROP TABLE fee_fine_action CASCADE;
DROP TABLE fee_fine_account CASCADE;
DROP FUNCTION fee_fine_account_charged();
DROP FUNCTION fee_fine_account_version_moves();
ALTER TABLE circulation_rule DROP COLUMN overdue_fine_policy_id CASCADE, DROP COLUMN lost_item_policy_id CASCADE;
ALTER TABLE circulation_rules DROP COLUMN fallback_overdue_fine_policy_id CASCADE, DROP COLUMN fallback_lost_item_policy_id CASCADE;
DROP TABLE lost_item_fee_policy CASCADE;
DROP TABLE overdue_fine_policy CASCADE;
DROP TABLE payment_method CASCADE;
DROP TABLE fee_fine_type CASCADE;
DROP TABLE fee_fine_owner CASCADE;
