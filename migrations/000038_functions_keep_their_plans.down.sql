-- The functions as migrations 34, 35 and 37 made them: SQL functions, and
-- calendar_moved reading a month of hours every time.

CREATE OR REPLACE FUNCTION fee_fine_types_for(tenant text) RETURNS void
LANGUAGE sql SET search_path FROM CURRENT AS $$
    INSERT INTO fee_fine_type (tenant_id, id, jsonb)
    SELECT tenant, t.id::uuid, jsonb_build_object('id', t.id, 'feeFineType', t.name, 'automatic', true)
      FROM (VALUES ('9523cb96-e752-40c2-89da-60f3961a488d', 'Overdue fine'),
                   ('d20df2fb-45fd-4184-b238-0d25747ffdd9', 'Replacement processing fee'),
                   ('cf238f9f-7018-47b7-b815-bb2db798e19f', 'Lost item fee'),
                   ('c7dede15-aa48-45ed-860b-f996540180e0', 'Lost item processing fee')) AS t (id, name)
    ON CONFLICT DO NOTHING
$$;

CREATE OR REPLACE FUNCTION calendar_weekday(name text) RETURNS integer
    LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT array_position(ARRAY['MONDAY','TUESDAY','WEDNESDAY','THURSDAY','FRIDAY','SATURDAY','SUNDAY'], name) - 1
$$;

CREATE OR REPLACE FUNCTION calendar_week_minutes(doc jsonb) RETURNS TABLE (n integer, minutes int4range)
    LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    WITH h AS (
        SELECT o.n::integer AS n,
               calendar_weekday(o.x ->> 'startDay') * 1440 + extract(epoch FROM calendar_time(o.x ->> 'startTime'))::integer / 60 AS s,
               calendar_weekday(o.x ->> 'endDay') * 1440 + extract(epoch FROM calendar_time(o.x ->> 'endTime'))::integer / 60 + 1 AS e
          FROM jsonb_array_elements(coalesce(doc -> 'normalHours', '[]')) WITH ORDINALITY AS o (x, n)
    )
    SELECT n, int4range(s, e) FROM h WHERE s < e
    UNION ALL SELECT n, int4range(s, 10080) FROM h WHERE s >= e
    UNION ALL SELECT n, int4range(0, e) FROM h WHERE s >= e
$$;

CREATE OR REPLACE FUNCTION calendar_surrounding(p_tenant text, p_sp uuid, p_day date) RETURNS jsonb
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT jsonb_build_object('openings', jsonb_build_array(
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day - 1, -1), p_day - 1)),
        calendar_day(p_tenant, p_sp, p_day),
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day + 1, 1), p_day + 1))))
$$;

CREATE OR REPLACE FUNCTION calendar_open(p_tenant text, p_sp uuid, p_from date, p_to date, p_zone text) RETURNS tstzmultirange
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce(range_agg(tstzrange((d.day + (o ->> 'startTime')::time) AT TIME ZONE p_zone,
                                        CASE WHEN (o ->> 'endTime')::time = time '23:59' THEN (d.day + 1 + time '00:00') AT TIME ZONE p_zone
                                             ELSE (d.day + (o ->> 'endTime')::time) AT TIME ZONE p_zone END)),
                    '{}'::tstzmultirange)
      FROM (SELECT p_from + i AS day FROM generate_series(0, p_to - p_from) AS i) d,
           jsonb_array_elements(calendar_day(p_tenant, p_sp, d.day) -> 'openings') o
$$;

CREATE OR REPLACE FUNCTION loan_due_date(p_tenant text, p_sp uuid, p_due timestamptz, p_policy jsonb, p_now timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT calendar_moved(p_tenant, p_sp, p_due, p_policy #>> '{loansPolicy,closedLibraryDueDateManagementId}',
                          coalesce(p_policy #>> '{loansPolicy,period,intervalId}', 'Days') IN ('Minutes', 'Hours'),
                          CASE WHEN p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}' IN ('Minutes', 'Hours')
                                AND (p_policy #>> '{loansPolicy,openingTimeOffset,duration}') ~ '^\d{1,6}$'
                               THEN ((p_policy #>> '{loansPolicy,openingTimeOffset,duration}') || ' ' ||
                                     (p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}'))::interval END,
                          p_now)
$$;

CREATE OR REPLACE FUNCTION notice_event(kind text, old jsonb, new jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT CASE
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
    END
$$;

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
    open := calendar_open(p_tenant, p_sp, greatest(first, least(day, (p_now AT TIME ZONE zone)::date) - 1),
                          least(last, day + 31), zone);
    IF open @> p_at THEN
        RETURN p_at;
    END IF;
    IF p_strategy = 'MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS' THEN
        SELECT upper(o) INTO at FROM unnest(open) o WHERE upper(o) > p_now ORDER BY lower(o) LIMIT 1;
        RETURN coalesce(at, p_at);
    END IF;
    IF p_strategy = 'MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS' THEN
        SELECT o INTO r FROM unnest(open) o WHERE lower(o) > p_at ORDER BY lower(o) LIMIT 1;
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
