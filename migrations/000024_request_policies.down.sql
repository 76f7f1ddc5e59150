ALTER TABLE circulation_rule DROP COLUMN request_policy_id;
ALTER TABLE circulation_rules DROP COLUMN fallback_request_policy_id;
DROP TABLE request_policy;
