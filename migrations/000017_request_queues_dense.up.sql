-- Storage keeps every item's queue dense from this release on (a closed
-- request holds no position, open ones hold 1 to n, each once); requests
-- written before may not be: a closed request that kept its position, or
-- gaps left by one. Both are put right here, once: closed requests lose
-- their positions, and each item's open requests are numbered again from 1
-- in their order (position, then request date, then id), each statement
-- checked whole against the position key at its end. The requests changed
-- are announced as any write of theirs is.
UPDATE request SET jsonb = jsonb - 'position'
 WHERE left(status, 5) <> 'Open ' AND jsonb ? 'position';

UPDATE request r SET jsonb = jsonb_set(r.jsonb, '{position}', to_jsonb(n.place))
  FROM (SELECT tenant_id, id, row_number() OVER (PARTITION BY tenant_id, item_id
                                                  ORDER BY position NULLS LAST, jsonb ->> 'requestDate', id)::integer AS place
          FROM request WHERE left(status, 5) = 'Open ') n
 WHERE r.tenant_id = n.tenant_id AND r.id = n.id AND r.position IS DISTINCT FROM n.place;
