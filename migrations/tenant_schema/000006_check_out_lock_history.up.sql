-- Who holds a lock, as the acquiring check-out told it (instance, request
-- id, item barcode, service point) and the user it acted for; FOLIO's
-- clients send none, and the column stays NULL.
ALTER TABLE check_out_lock ADD COLUMN holder jsonb;
-- What a takeover replaced: set by the acquisition that takes over an
-- expired lock, in the same statement, so the event can name the lock that
-- expired while held without the common path reading anything first.
ALTER TABLE check_out_lock ADD COLUMN previous jsonb;

-- The events that explain a wait or a refusal: a lock that expired while
-- held, a takeover, a release by someone other than the holder, a waiter
-- that gave up. Written only on those paths, never by an uncontended
-- acquire and release; trimmed by the sweeper to a retention period and a
-- maximum number of rows.
CREATE TABLE check_out_lock_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    type        text NOT NULL,
    user_id     uuid NOT NULL,
    lock_id     uuid,
    holder      jsonb,
    by_whom     jsonb,
    waited_ms   integer,
    CONSTRAINT check_out_lock_event_type_check
        CHECK (type IN ('expired', 'taken_over', 'released_by_other', 'waiter_gave_up'))
);

CREATE INDEX check_out_lock_event_user_idx ON check_out_lock_event (user_id, occurred_at);
CREATE INDEX check_out_lock_event_time_idx ON check_out_lock_event (occurred_at);
