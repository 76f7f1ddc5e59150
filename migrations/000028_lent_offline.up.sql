-- A check-out a self-check machine made offline and recorded later past a
-- rule a live one keeps is a line of the lock history, for the operator:
-- lent_offline, naming the loan and the rules it broke (FOLIO's refusal
-- codes, as the loan's offline.brokenRules names them).
ALTER TABLE check_out_lock_event DROP CONSTRAINT check_out_lock_event_type_check;
ALTER TABLE check_out_lock_event ADD CONSTRAINT check_out_lock_event_type_check
    CHECK (type IN ('expired', 'taken_over', 'released_by_other', 'waiter_gave_up', 'lent_offline'));
ALTER TABLE check_out_lock_event ADD COLUMN loan_id uuid;
ALTER TABLE check_out_lock_event ADD COLUMN broken_rules text[];
