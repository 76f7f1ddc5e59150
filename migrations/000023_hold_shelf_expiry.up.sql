-- The sweeper closes the requests left on a hold shelf past their
-- holdShelfExpirationDate (Closed - Pickup expired). It finds them across
-- tenants through this index, as it finds expired locks: a pass with
-- nothing expired is one index probe. Check-ins write the date in UTC
-- (YYYY-MM-DDTHH:MI:SS.MSZ), whose text sorts as its time; the sweeper
-- checks each candidate's date as a date (stored_time) before it acts.
CREATE INDEX request_hold_shelf_expiry ON request ((jsonb ->> 'holdShelfExpirationDate'))
    WHERE status = 'Open - Awaiting pickup';
