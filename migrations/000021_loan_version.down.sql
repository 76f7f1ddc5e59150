DROP TRIGGER loan_version_moves ON loan;
DROP FUNCTION loan_version_moves();
ALTER TABLE loan DROP COLUMN version;
ALTER TABLE loan DISABLE TRIGGER USER;
UPDATE loan SET jsonb = jsonb - '_version';
ALTER TABLE loan ENABLE TRIGGER USER;
