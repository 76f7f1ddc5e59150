-- Settings entries get optimistic locking, as items have it: every write
-- increments "_version", and a write that names the version it read fails
-- if another write came first. circulation's PATCH of the check-out lock
-- settings is a read-merge-write and relies on it to lose no change. A
-- write that names no version still replaces the entry, as FOLIO's clients
-- expect.
UPDATE setting SET jsonb = jsonb_set(jsonb, '{_version}', '1') WHERE NOT jsonb ? '_version';

ALTER TABLE setting
    ADD COLUMN version integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED;
