DELETE FROM check_out_lock_event WHERE type = 'returned_before_loan';
ALTER TABLE check_out_lock_event DROP CONSTRAINT check_out_lock_event_type_check;
ALTER TABLE check_out_lock_event ADD CONSTRAINT check_out_lock_event_type_check
    CHECK (type IN ('expired', 'taken_over', 'released_by_other', 'waiter_gave_up', 'lent_offline'));
