-- The sweeper closes the open requests not yet on the hold shelf past
-- their requestExpirationDate (Closed - Unfilled). It finds them across
-- tenants through this index, as it finds the hold shelf's: a pass with
-- nothing expired is one index probe. The date is the client's, with any
-- offset: the sweeper looks for the dates written on a day before the one
-- after now and 18 hours, and checks each candidate's as a date
-- (stored_time) before it acts.
CREATE INDEX request_expiry ON request ((jsonb ->> 'requestExpirationDate'))
    WHERE status IN ('Open - Not yet filled', 'Open - In transit', 'Open - Awaiting delivery');
