-- The check-out lock feature as the settings entry says it, decoded once:
-- storage decodes the checkoutLockFeature entry's value with the one
-- decoder both services use (schemas/locksettings) whenever it writes the
-- entry, and keeps the result here, 'on', 'off' or 'unset' (the value does
-- not say); a check-out's write reads this, never the value's text. NULL
-- is not decoded yet: a row written before this column, or by an instance
-- of an earlier release, which storage decodes at start-up and with every
-- tenant operation.
ALTER TABLE setting ADD COLUMN lock_feature text
    CONSTRAINT setting_lock_feature_check CHECK (lock_feature IN ('on', 'off', 'unset'));

-- A write that changes the entry without saying what it decodes to (an
-- earlier release's) leaves it to be decoded again.
CREATE FUNCTION setting_lock_feature_stale() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.jsonb IS DISTINCT FROM OLD.jsonb AND NEW.lock_feature IS NOT DISTINCT FROM OLD.lock_feature THEN
        NEW.lock_feature := NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER setting_lock_feature_stale BEFORE UPDATE ON setting
    FOR EACH ROW EXECUTE FUNCTION setting_lock_feature_stale();
