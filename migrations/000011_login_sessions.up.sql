-- Sign-ins counted before they are checked, and sessions that end.
--
-- login_failure now counts attempts: an attempt is counted (failures + 1)
-- before its password or PIN is checked and refused at once when a count is
-- at its maximum; a success gives its own count back. succeeded_at marks
-- the (account, address) pairs that signed in: an address the account
-- signed in from is not slowed by the account's failures elsewhere.
ALTER TABLE login_failure ADD COLUMN succeeded_at timestamptz;

-- A session is one sign-in and the refresh tokens rotated from it. Its
-- access tokens name it (the "session_id" claim); both services refuse
-- them once the session has ended (logout, a refresh token used twice,
-- its account disabled) or is gone with its deleted account.
CREATE TABLE login_session (
    tenant_id  text NOT NULL,
    id         uuid NOT NULL,
    account_id uuid NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    ended_at   timestamptz,
    end_reason text,
    CONSTRAINT login_session_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT login_session_account_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES account (tenant_id, id) ON DELETE CASCADE
);

CREATE INDEX login_session_expires_at_idx ON login_session (expires_at);
CREATE INDEX login_session_account_idx ON login_session (tenant_id, account_id);

-- Disabling an account ends its sessions, in the write that disables it
-- (deleting one deletes them); enabling it again revives none.
CREATE FUNCTION login_session_end_disabled() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE login_session SET ended_at = now(), end_reason = 'account_disabled'
     WHERE tenant_id = NEW.tenant_id AND account_id = NEW.id AND ended_at IS NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER account_disabled AFTER UPDATE OF jsonb ON account
    FOR EACH ROW WHEN (NEW.jsonb -> 'active' = 'false'::jsonb AND OLD.jsonb -> 'active' IS DISTINCT FROM 'false'::jsonb)
    EXECUTE FUNCTION login_session_end_disabled();

-- The refresh tokens issued before sessions existed each become a session
-- of their own.
ALTER TABLE refresh_token ADD COLUMN session_id uuid;
UPDATE refresh_token SET session_id = gen_random_uuid();
INSERT INTO login_session (tenant_id, id, account_id, started_at, expires_at, ended_at, end_reason)
SELECT tenant_id, session_id, account_id, now(), expires_at, revoked_at, CASE WHEN revoked_at IS NOT NULL THEN 'logout' END
  FROM refresh_token;
ALTER TABLE refresh_token ALTER COLUMN session_id SET NOT NULL;
ALTER TABLE refresh_token ADD CONSTRAINT refresh_token_session_fkey
    FOREIGN KEY (tenant_id, session_id) REFERENCES login_session (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX refresh_token_session_idx ON refresh_token (tenant_id, session_id);

-- An account record kept any field it was sent, a password among them,
-- and returned it: no account keeps one any more (accounts now refuse
-- fields they do not describe; a password goes to /authn/credentials).
UPDATE account SET jsonb = jsonb - 'password' WHERE jsonb ? 'password';
