-- A transaction may record its events in its commit's row (payload, in
-- the order recorded) instead of a row of outbox each: one row and one
-- index entry for a whole write. A check-out's write does so. An event
-- keeps the record's old and new states as they are (FOLIO's data is
-- {old, new}): the relay puts them together when it publishes, so the
-- write copies the documents and never builds JSON of them.
--
-- Rows whose payload is NULL (writes recorded by migration 9's triggers,
-- and those of an instance not yet upgraded) keep their events in outbox,
-- found by tenant and transaction as before; the relay reads both.
--
-- A writer touches one index of outbox_commit: the one the relay finds
-- unnumbered commits by. The relay's numbering finds its commits through
-- it too (pos is unique, from its identity); the numbers' index holds
-- numbered commits only.
CREATE TYPE outbox_event AS (
    id   uuid,
    kind text,
    type text,
    old  jsonb,
    new  jsonb
);

ALTER TABLE outbox_commit ADD COLUMN payload outbox_event[];

-- A payload stays in its row, as it is, while the row fits a page: the
-- write then never compresses it (pglz cost a check-out more than the
-- rest of recording its events, at PostgreSQL's default of about 2 kB),
-- nor does the relay decompress it. A larger one is compressed and moved
-- out of the row as usual.
ALTER TABLE outbox_commit SET (toast_tuple_target = 8160);

ALTER TABLE outbox_commit DROP CONSTRAINT outbox_commit_pkey;

DROP INDEX outbox_commit_seq_idx;
CREATE INDEX outbox_commit_seq_idx ON outbox_commit (tenant_id, seq) WHERE seq IS NOT NULL;
