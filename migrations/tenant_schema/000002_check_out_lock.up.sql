-- One row per patron whose check-outs are serialised right now. The unique
-- user_id is the lock: two check-outs cannot both hold a row for one patron.
-- A row whose expires_at has passed is the same as no row; the next acquirer
-- takes it over in the same statement that would have inserted it, and a
-- background sweeper deletes the rest so the table stays small.
CREATE TABLE check_out_lock (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id       uuid NOT NULL,
    creation_date timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    ttl_ms        integer NOT NULL CHECK (ttl_ms > 0),
    CONSTRAINT check_out_lock_user_id_key UNIQUE (user_id),
    CONSTRAINT check_out_lock_expiry_check CHECK (expires_at > creation_date)
);

-- The sweeper and the list both look for live or expired rows by expiry.
CREATE INDEX check_out_lock_expires_at_idx ON check_out_lock (expires_at);
