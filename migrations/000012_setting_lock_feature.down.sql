DROP TRIGGER setting_lock_feature_stale ON setting;
DROP FUNCTION setting_lock_feature_stale();
ALTER TABLE setting DROP COLUMN lock_feature;
