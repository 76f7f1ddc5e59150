DROP INDEX refresh_token_session_idx;
ALTER TABLE refresh_token DROP CONSTRAINT refresh_token_session_fkey;
ALTER TABLE refresh_token DROP COLUMN session_id;
DROP TRIGGER account_disabled ON account;
DROP FUNCTION login_session_end_disabled();
DROP TABLE login_session;
ALTER TABLE login_failure DROP COLUMN succeeded_at;
