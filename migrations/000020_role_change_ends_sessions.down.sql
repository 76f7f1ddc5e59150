DROP TRIGGER account_roles_changed ON account;
DROP TRIGGER account_disabled ON account;
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
DROP FUNCTION login_session_end_account();
