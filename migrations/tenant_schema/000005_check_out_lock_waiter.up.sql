-- Patrons someone is waiting to lock, and until when. A release announces
-- itself (NOTIFY) only when its patron has a row here: PostgreSQL
-- serialises the commits of notifying transactions, so an uncontended
-- release, the common case, must not notify. A waiter registers before it
-- looks at the lock for the last time, so a release either sees the row or
-- happened before that look. Rows only ever extend their expiry; expired
-- ones mean nothing and are swept.
CREATE TABLE check_out_lock_waiter (
    user_id    uuid PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
