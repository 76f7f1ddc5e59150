-- The two functions every check-out's write calls, loan_due_date (in the
-- write's statement) and notice_event (from the loans' trigger of
-- migration 37), in PL/pgSQL. As SQL functions with a SET clause,
-- PostgreSQL neither inlined them nor kept their plans: it parsed and
-- planned each at every call. A PL/pgSQL function keeps its plans for its
-- session. What they answer is unchanged.

CREATE OR REPLACE FUNCTION loan_due_date(p_tenant text, p_sp uuid, p_due timestamptz, p_policy jsonb, p_now timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN calendar_moved(p_tenant, p_sp, p_due, p_policy #>> '{loansPolicy,closedLibraryDueDateManagementId}',
                          coalesce(p_policy #>> '{loansPolicy,period,intervalId}', 'Days') IN ('Minutes', 'Hours'),
                          CASE WHEN p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}' IN ('Minutes', 'Hours')
                                AND (p_policy #>> '{loansPolicy,openingTimeOffset,duration}') ~ '^\d{1,6}$'
                               THEN ((p_policy #>> '{loansPolicy,openingTimeOffset,duration}') || ' ' ||
                                     (p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}'))::interval END,
                          p_now);
END
$$;

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
