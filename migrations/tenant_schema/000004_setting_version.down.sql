ALTER TABLE setting DROP COLUMN version;

UPDATE setting SET jsonb = jsonb - '_version';
