DROP INDEX login_failure_first_at_idx;
ALTER TABLE login_failure DROP COLUMN checking_at, DROP COLUMN checking;
