-- Changing an account's roles ends its sessions, in the write that changes
-- them, as disabling it does: an access token names the roles its account
-- had when it signed in, and each service expands them as they are named,
-- so a role taken away would otherwise hold until the token expired (and a
-- role given would wait for the next sign-in all the same). The roles
-- compare as a set: the same roles in another order, or a change of
-- anything else (the name, the username), ends nothing.
--
-- One function ends an account's sessions for the reason its trigger
-- names (TG_ARGV[0]); the trigger account_disabled (migration 11) calls it
-- too.
CREATE FUNCTION login_session_end_account() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE login_session SET ended_at = now(), end_reason = TG_ARGV[0]
     WHERE tenant_id = NEW.tenant_id AND account_id = NEW.id AND ended_at IS NULL;
    RETURN NULL;
END
$$;

DROP TRIGGER account_disabled ON account;
DROP FUNCTION login_session_end_disabled();
CREATE TRIGGER account_disabled AFTER UPDATE OF jsonb ON account
    FOR EACH ROW WHEN (NEW.jsonb -> 'active' = 'false'::jsonb AND OLD.jsonb -> 'active' IS DISTINCT FROM 'false'::jsonb)
    EXECUTE FUNCTION login_session_end_account('account_disabled');

-- Triggers fire in the order of their names: an account disabled and
-- given other roles in one write has its sessions ended as disabled.
CREATE TRIGGER account_roles_changed AFTER UPDATE OF jsonb ON account
    FOR EACH ROW WHEN (NOT (coalesce(NEW.jsonb -> 'roles', '[]'::jsonb) @> coalesce(OLD.jsonb -> 'roles', '[]'::jsonb)
                        AND coalesce(OLD.jsonb -> 'roles', '[]'::jsonb) @> coalesce(NEW.jsonb -> 'roles', '[]'::jsonb)))
    EXECUTE FUNCTION login_session_end_account('roles_changed');
