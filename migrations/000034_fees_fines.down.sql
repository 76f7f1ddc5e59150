-- The tenants' views of the tables this migration added go with them.
DROP TRIGGER tenant_fee_fine_types ON tenant;
DROP FUNCTION tenant_fee_fine_types();
DROP FUNCTION fee_fine_types_for(text);
DROP TABLE fee_fine_action CASCADE;
DROP TABLE fee_fine_account CASCADE;
DROP FUNCTION fee_fine_account_charged();
DROP FUNCTION fee_fine_account_version_moves();
DROP TABLE circulation_rule_fee CASCADE;
DROP TABLE circulation_rules_fee CASCADE;
DROP TABLE lost_item_fee_policy CASCADE;
DROP TABLE overdue_fine_policy CASCADE;
DROP TABLE payment_method CASCADE;
DROP TABLE fee_fine_type CASCADE;
DROP TABLE fee_fine_owner CASCADE;
