-- Every SQL function with a SET clause, in PL/pgSQL. PostgreSQL 15
-- neither inlines such a function nor keeps its plan: it parsed and
-- planned its body at every call. Every check-out's write called two
-- (loan_due_date in its statement, notice_event from the loans' trigger
-- of migration 37), and a due date or a hold shelf moved off a closed day
-- called the calendar's (calendar_week_minutes for every day looked at,
-- calendar_weekday for every opening of its week). A PL/pgSQL function
-- keeps each plan for its session. What each answers is unchanged.

CREATE OR REPLACE FUNCTION fee_fine_types_for(tenant text) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO fee_fine_type (tenant_id, id, jsonb)
    SELECT tenant, t.id::uuid, jsonb_build_object('id', t.id, 'feeFineType', t.name, 'automatic', true)
      FROM (VALUES ('9523cb96-e752-40c2-89da-60f3961a488d', 'Overdue fine'),
                   ('d20df2fb-45fd-4184-b238-0d25747ffdd9', 'Replacement processing fee'),
                   ('cf238f9f-7018-47b7-b815-bb2db798e19f', 'Lost item fee'),
                   ('c7dede15-aa48-45ed-860b-f996540180e0', 'Lost item processing fee')) AS t (id, name)
    ON CONFLICT DO NOTHING;
END
$$;

CREATE OR REPLACE FUNCTION calendar_weekday(name text) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN array_position(ARRAY['MONDAY','TUESDAY','WEDNESDAY','THURSDAY','FRIDAY','SATURDAY','SUNDAY'], name) - 1;
END
$$;

CREATE OR REPLACE FUNCTION calendar_week_minutes(doc jsonb) RETURNS TABLE (n integer, minutes int4range)
    LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH h AS (
        SELECT o.n::integer AS n,
               calendar_weekday(o.x ->> 'startDay') * 1440 + extract(epoch FROM calendar_time(o.x ->> 'startTime'))::integer / 60 AS s,
               calendar_weekday(o.x ->> 'endDay') * 1440 + extract(epoch FROM calendar_time(o.x ->> 'endTime'))::integer / 60 + 1 AS e
          FROM jsonb_array_elements(coalesce(doc -> 'normalHours', '[]')) WITH ORDINALITY AS o (x, n)
    )
    SELECT n, int4range(s, e) FROM h WHERE s < e
    UNION ALL SELECT n, int4range(s, 10080) FROM h WHERE s >= e
    UNION ALL SELECT n, int4range(0, e) FROM h WHERE s >= e;
END
$$;

CREATE OR REPLACE FUNCTION calendar_surrounding(p_tenant text, p_sp uuid, p_day date) RETURNS jsonb
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN jsonb_build_object('openings', jsonb_build_array(
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day - 1, -1), p_day - 1)),
        calendar_day(p_tenant, p_sp, p_day),
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day + 1, 1), p_day + 1))));
END
$$;

CREATE OR REPLACE FUNCTION calendar_open(p_tenant text, p_sp uuid, p_from date, p_to date, p_zone text) RETURNS tstzmultirange
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN (SELECT coalesce(range_agg(tstzrange((d.day + (o ->> 'startTime')::time) AT TIME ZONE p_zone,
                                        CASE WHEN (o ->> 'endTime')::time = time '23:59' THEN (d.day + 1 + time '00:00') AT TIME ZONE p_zone
                                             ELSE (d.day + (o ->> 'endTime')::time) AT TIME ZONE p_zone END)),
                    '{}'::tstzmultirange)
      FROM (SELECT p_from + i AS day FROM generate_series(0, p_to - p_from) AS i) d,
           jsonb_array_elements(calendar_day(p_tenant, p_sp, d.day) -> 'openings') o);
END
$$;

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

-- calendar_moved reads a service point's hours for an hour's loan (or a
-- hold shelf's) first for the days around the due date and now, and for
-- the month after only when those days cannot answer: it read the month's
-- hours every time (33 days, each a calendar_day), several milliseconds a
-- due date. It answers what it answered, wherever it answered (an opening
-- a spring-forward gap turns inside out, which PostgreSQL refuses, is
-- refused now only when the days read hold it).
CREATE OR REPLACE FUNCTION calendar_moved(p_tenant text, p_sp uuid, p_at timestamptz, p_strategy text, p_short boolean,
                               p_offset interval, p_now timestamptz) RETURNS timestamptz
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    zone text;
    day date;
    first date;
    last date;
    open tstzmultirange;
    r tstzrange;
    at timestamptz;
    lo date;
    hi date;
    near date;
    edge timestamptz;
BEGIN
    IF p_at IS NULL OR p_sp IS NULL OR coalesce(p_strategy, 'KEEP_THE_CURRENT_DUE_DATE_TIME') = 'KEEP_THE_CURRENT_DUE_DATE_TIME' THEN
        RETURN p_at;
    END IF;
    SELECT min(start_date), max(end_date) INTO first, last FROM calendar_assignment
     WHERE tenant_id = p_tenant AND service_point_id = p_sp;
    IF first IS NULL THEN
        RETURN p_at;
    END IF;
    zone := calendar_zone(p_tenant);
    day := (p_at AT TIME ZONE zone)::date;
    IF p_strategy = 'KEEP_THE_CURRENT_DUE_DATE' THEN
        RETURN (day + time '23:59:59') AT TIME ZONE zone;
    END IF;
    IF p_strategy IN ('MOVE_TO_THE_END_OF_THE_PREVIOUS_OPEN_DAY', 'MOVE_TO_THE_END_OF_THE_NEXT_OPEN_DAY') OR NOT p_short THEN
        day := calendar_open_day(p_tenant, p_sp, day, CASE WHEN p_strategy = 'MOVE_TO_THE_END_OF_THE_PREVIOUS_OPEN_DAY' THEN -1 ELSE 1 END);
        IF day IS NULL THEN
            RETURN p_at;
        END IF;
        RETURN (day + time '23:59:59') AT TIME ZONE zone;
    END IF;
    -- The hours open from the day before p_at's or now's to a month on
    -- (lo to hi), read first up to the day after p_at's and now's (near):
    -- what the nearer days' hours answer before edge, where they end, no
    -- later day changes (an opening running into the day after near
    -- ends at edge in them; one ending before edge ends there in all).
    lo := greatest(first, least(day, (p_now AT TIME ZONE zone)::date) - 1);
    hi := least(last, day + 31);
    near := least(hi, greatest(day, (p_now AT TIME ZONE zone)::date) + 1);
    edge := (near + 1 + time '00:00') AT TIME ZONE zone;
    open := calendar_open(p_tenant, p_sp, lo, near, zone);
    IF open @> p_at THEN
        RETURN p_at;
    END IF;
    IF p_strategy = 'MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS' THEN
        SELECT upper(o) INTO at FROM unnest(open) o WHERE upper(o) > p_now ORDER BY lower(o) LIMIT 1;
        IF near < hi AND (at IS NULL OR at >= edge) THEN
            open := calendar_open(p_tenant, p_sp, lo, hi, zone);
            SELECT upper(o) INTO at FROM unnest(open) o WHERE upper(o) > p_now ORDER BY lower(o) LIMIT 1;
        END IF;
        RETURN coalesce(at, p_at);
    END IF;
    IF p_strategy = 'MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS' THEN
        SELECT o INTO r FROM unnest(open) o WHERE lower(o) > p_at ORDER BY lower(o) LIMIT 1;
        IF near < hi AND (r IS NULL OR lower(r) + coalesce(p_offset, interval '0') >= edge) THEN
            open := calendar_open(p_tenant, p_sp, lo, hi, zone);
            SELECT o INTO r FROM unnest(open) o WHERE lower(o) > p_at ORDER BY lower(o) LIMIT 1;
        END IF;
        IF r IS NULL THEN
            RETURN p_at;
        END IF;
        at := lower(r) + coalesce(p_offset, interval '0');
        IF open @> at THEN
            RETURN at;
        END IF;
        SELECT max(upper(o)) INTO at FROM unnest(open) o WHERE upper(o) <= at;
        RETURN at;
    END IF;
    RETURN p_at;
END
$$;
