-- Every write of a loan, an item or a request carries an id of its own,
-- which its transaction stores here first (a second transaction storing
-- the same id waits for the first, then fails), with the answer it gave,
-- before it commits; a write that writes nothing takes its id away again.
-- Whether a write landed is asked of its id, never guessed from the
-- records; a write sent again with its id answers the stored answer
-- instead of writing twice. The id is the caller's: a random one per
-- call, or one made from a client's Idempotency-Key (with the digest of
-- the request it came with, so that the key reused for another request is
-- refused). kind names what the write does; the sweeper deletes rows past
-- the window their ids are kept for.
CREATE TABLE write_log (
    tenant_id text NOT NULL,
    id uuid NOT NULL,
    kind text NOT NULL,
    digest text,
    answer jsonb,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX write_log_written_at ON write_log (written_at);
