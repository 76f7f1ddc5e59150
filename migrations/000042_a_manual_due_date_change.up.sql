-- A librarian's change of a loan's due date (circulation's
-- change-due-date, which writes the loan with action dueDateChanged) is
-- the notice event FOLIO names 'Manual due date change': a notice policy's
-- notice on it is sent, and the loan's due date notices are scheduled
-- again from the new date, as on any other move of its due date. Any
-- other move of a due date is 'Due date changed', as before.
CREATE OR REPLACE FUNCTION notice_event(kind text, old jsonb, new jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN CASE
        WHEN kind = 'feefine' THEN
            CASE WHEN old IS NULL THEN 'Fee/fine charged' END
        WHEN kind = 'loan' AND old IS NULL THEN
            CASE WHEN new #>> '{status,name}' = 'Open' THEN 'Check out' END
        WHEN kind = 'loan' THEN
            CASE WHEN old #>> '{status,name}' = 'Open' AND new #>> '{status,name}' = 'Closed' THEN 'Check in'
                 WHEN new #>> '{status,name}' <> 'Open' THEN NULL
                 WHEN coalesce((new ->> 'renewalCount')::numeric, 0) > coalesce((old ->> 'renewalCount')::numeric, 0) THEN 'Renewed'
                 WHEN coalesce(new ->> 'dueDateChangedByRecall', '') = 'true'
                      AND coalesce(old ->> 'dueDateChangedByRecall', '') <> 'true' THEN 'Item recalled'
                 WHEN new ->> 'action' = 'dueDateChanged'
                      AND (old ->> 'action' IS DISTINCT FROM 'dueDateChanged' OR new ->> 'dueDate' IS DISTINCT FROM old ->> 'dueDate')
                      THEN 'Manual due date change'
                 WHEN new ->> 'dueDate' IS DISTINCT FROM old ->> 'dueDate' THEN 'Due date changed'
            END
        WHEN old IS NULL THEN
            CASE new ->> 'requestType' WHEN 'Page' THEN 'Paging request' WHEN 'Hold' THEN 'Hold request'
                                       WHEN 'Recall' THEN 'Recall request' END
        WHEN new ->> 'status' IS DISTINCT FROM old ->> 'status' THEN
            CASE new ->> 'status' WHEN 'Open - Awaiting pickup' THEN 'Available'
                                  WHEN 'Closed - Cancelled' THEN 'Request cancellation'
                                  WHEN 'Closed - Unfilled' THEN 'Request expiration'
                                  WHEN 'Closed - Pickup expired' THEN 'Hold expiration' END
        WHEN new ->> 'holdShelfExpirationDate' IS DISTINCT FROM old ->> 'holdShelfExpirationDate'
          OR new ->> 'requestExpirationDate' IS DISTINCT FROM old ->> 'requestExpirationDate' THEN 'Request dates changed'
    END;
END
$$;
