-- Events recorded in their commit's row go back to a row of outbox each,
-- in their order, so that migration 9's relay finds them.
INSERT INTO outbox (tenant_id, xid, id, kind, type, created_at, data)
SELECT c.tenant_id, c.xid, e.id, e.kind, e.type, c.committed_at, jsonb_build_object('old', e.old, 'new', e.new)
  FROM outbox_commit c CROSS JOIN LATERAL unnest(c.payload) WITH ORDINALITY AS e (id, kind, type, old, new, k)
 WHERE c.payload IS NOT NULL
 ORDER BY c.pos, e.k;

DROP INDEX outbox_commit_seq_idx;
CREATE INDEX outbox_commit_seq_idx ON outbox_commit (tenant_id, seq);

ALTER TABLE outbox_commit ADD CONSTRAINT outbox_commit_pkey PRIMARY KEY (pos);

ALTER TABLE outbox_commit DROP COLUMN payload;

ALTER TABLE outbox_commit RESET (toast_tuple_target);

DROP TYPE outbox_event;
