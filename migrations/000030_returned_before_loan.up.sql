-- A check-in dated before the item's open loan was lent (a sorter's or a
-- kiosk's, sent after an outage, after the item came back at the desk and
-- was lent again) closes nothing; it is a line of the lock history, for
-- the desk: returned_before_loan, naming the loan left open and its
-- borrower (user_id).
ALTER TABLE check_out_lock_event DROP CONSTRAINT check_out_lock_event_type_check;
ALTER TABLE check_out_lock_event ADD CONSTRAINT check_out_lock_event_type_check
    CHECK (type IN ('expired', 'taken_over', 'released_by_other', 'waiter_gave_up', 'lent_offline', 'returned_before_loan'));
