-- Service point calendars, as FOLIO's mod-calendar keeps them: a calendar
-- (its name, the dates it is in force, the service points it is assigned
-- to, its normal hours by weekday and its exceptions: closures and
-- exceptional openings by date) and, from them, the opening hours of a
-- service point on a date. Loans' due dates, hold shelves' expirations and
-- FOLIO's calendar routes ask the functions below, and nothing else, what
-- a service point's hours are and where a date on a closed day moves.
--
-- A calendar is checked here, whoever writes it (mod-calendar's rules:
-- dates that are dates, in order; exceptions inside the calendar and
-- apart from one another; openings inside their exception; normal hours
-- apart from one another), each refusal by a constraint name the service
-- reports. Its assignments are rows of calendar_assignment, written with
-- it: two calendars of one service point are never in force on the same
-- day (writers of one service point's calendars take turns, by an
-- advisory lock, before they look).
CREATE TABLE calendar (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT calendar_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT calendar_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE calendar_assignment (
    tenant_id        text NOT NULL,
    calendar_id      uuid NOT NULL,
    service_point_id uuid NOT NULL,
    start_date       date NOT NULL,
    end_date         date NOT NULL,
    CONSTRAINT calendar_assignment_pkey PRIMARY KEY (tenant_id, service_point_id, start_date, calendar_id),
    CONSTRAINT calendar_assignment_calendar_fkey FOREIGN KEY (tenant_id, calendar_id) REFERENCES calendar (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT calendar_assignment_service_point_fkey FOREIGN KEY (tenant_id, service_point_id) REFERENCES service_point (tenant_id, id)
);
CREATE INDEX calendar_assignment_calendar ON calendar_assignment (tenant_id, calendar_id);

-- calendar_weekday is a weekday's number as mod-calendar names it,
-- Monday 0 to Sunday 6 (NULL for another name).
CREATE FUNCTION calendar_weekday(name text) RETURNS integer
    LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT array_position(ARRAY['MONDAY','TUESDAY','WEDNESDAY','THURSDAY','FRIDAY','SATURDAY','SUNDAY'], name) - 1
$$;

-- calendar_date and calendar_time read a calendar's date (YYYY-MM-DD)
-- and time (HH:MM or HH:MM:SS); NULL for anything else.
CREATE FUNCTION calendar_date(value text) RETURNS date
    LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
BEGIN
    IF value !~ '^\d{4}-\d{2}-\d{2}$' THEN
        RETURN NULL;
    END IF;
    RETURN make_date(substr(value, 1, 4)::integer, substr(value, 6, 2)::integer, substr(value, 9, 2)::integer);
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;

CREATE FUNCTION calendar_time(value text) RETURNS time
    LANGUAGE plpgsql IMMUTABLE SET search_path FROM CURRENT AS $$
BEGIN
    IF value !~ '^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$' THEN
        RETURN NULL;
    END IF;
    RETURN value::time;
END
$$;

-- calendar_refused raises the refusal of a calendar by the rule named
-- (the constraint name the service reports).
CREATE FUNCTION calendar_refused(rule text, detail text) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'calendar refused: %', detail USING ERRCODE = 'check_violation', CONSTRAINT = rule;
END
$$;

-- The normal hours of a calendar as minutes of the week, Monday 00:00
-- being 0: an opening from its start day and time to its end day and
-- time, inclusive of its last minute (mod-calendar's reading), split in
-- two where it runs past Sunday into Monday.
CREATE FUNCTION calendar_week_minutes(doc jsonb) RETURNS TABLE (n integer, minutes int4range)
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

CREATE FUNCTION calendar_checked() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    doc jsonb := NEW.jsonb;
    starts date := calendar_date(doc ->> 'startDate');
    ends date := calendar_date(doc ->> 'endDate');
    sp uuid;
    other text;
BEGIN
    IF btrim(coalesce(doc ->> 'name', '')) = '' THEN
        PERFORM calendar_refused('calendar_name', 'a calendar is named');
    END IF;
    IF starts IS NULL OR ends IS NULL OR starts > ends THEN
        PERFORM calendar_refused('calendar_date_range', 'startDate and endDate are dates, the first on or before the second');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(doc -> 'normalHours', '[]')) x
                WHERE calendar_weekday(x ->> 'startDay') IS NULL OR calendar_weekday(x ->> 'endDay') IS NULL
                   OR calendar_time(x ->> 'startTime') IS NULL OR calendar_time(x ->> 'endTime') IS NULL)
       OR EXISTS (SELECT 1 FROM calendar_week_minutes(doc) a JOIN calendar_week_minutes(doc) b ON a.n < b.n AND a.minutes && b.minutes) THEN
        PERFORM calendar_refused('calendar_normal_hours', 'normal hours name weekdays and times and do not overlap');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(doc -> 'exceptions', '[]')) x
                WHERE btrim(coalesce(x ->> 'name', '')) = ''
                   OR calendar_date(x ->> 'startDate') IS NULL OR calendar_date(x ->> 'endDate') IS NULL
                   OR calendar_date(x ->> 'startDate') > calendar_date(x ->> 'endDate')
                   OR calendar_date(x ->> 'startDate') < starts OR calendar_date(x ->> 'endDate') > ends
                   OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(x -> 'openings', '[]')) o
                               WHERE calendar_date(o ->> 'startDate') IS NULL OR calendar_date(o ->> 'endDate') IS NULL
                                  OR calendar_time(o ->> 'startTime') IS NULL OR calendar_time(o ->> 'endTime') IS NULL
                                  OR calendar_date(o ->> 'startDate') < calendar_date(x ->> 'startDate')
                                  OR calendar_date(o ->> 'endDate') > calendar_date(x ->> 'endDate')
                                  OR calendar_date(o ->> 'startDate') + calendar_time(o ->> 'startTime')
                                     > calendar_date(o ->> 'endDate') + calendar_time(o ->> 'endTime')))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(doc -> 'exceptions', '[]')) WITH ORDINALITY a (x, n)
                          JOIN jsonb_array_elements(coalesce(doc -> 'exceptions', '[]')) WITH ORDINALITY b (x, n)
                            ON a.n < b.n
                           AND daterange(calendar_date(a.x ->> 'startDate'), calendar_date(a.x ->> 'endDate'), '[]')
                            && daterange(calendar_date(b.x ->> 'startDate'), calendar_date(b.x ->> 'endDate'), '[]')) THEN
        PERFORM calendar_refused('calendar_exceptions', 'exceptions are named, lie within the calendar''s dates and apart from one another, and each opening lies within its exception, its start before its end');
    END IF;
    DELETE FROM calendar_assignment WHERE tenant_id = NEW.tenant_id AND calendar_id = NEW.id;
    FOR sp IN SELECT DISTINCT a::uuid FROM jsonb_array_elements_text(coalesce(doc -> 'assignments', '[]')) a ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('calendar ' || NEW.tenant_id || ' ' || sp::text, 0));
        SELECT c.name INTO other
          FROM calendar_assignment a JOIN calendar c ON c.tenant_id = a.tenant_id AND c.id = a.calendar_id
         WHERE a.tenant_id = NEW.tenant_id AND a.service_point_id = sp AND a.start_date <= ends AND a.end_date >= starts
         LIMIT 1;
        IF FOUND THEN
            PERFORM calendar_refused('calendar_assignment_overlap',
                format('service point %s has calendar %L in force on some of these dates', sp, other));
        END IF;
        INSERT INTO calendar_assignment (tenant_id, calendar_id, service_point_id, start_date, end_date)
        VALUES (NEW.tenant_id, NEW.id, sp, starts, ends);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER calendar_checked AFTER INSERT OR UPDATE ON calendar
    FOR EACH ROW EXECUTE FUNCTION calendar_checked();

-- calendar_day is a service point's openings on a date, in mod-calendar's
-- shape (singleDayOpening): the exception in force that day when there
-- is one, else the normal hours of its weekday; closed on a day no
-- calendar of the service point covers.
CREATE FUNCTION calendar_day(p_tenant text, p_sp uuid, p_day date) RETURNS jsonb
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    doc jsonb;
    exc jsonb;
    minute integer := (extract(isodow FROM p_day)::integer - 1) * 1440;
    openings jsonb;
BEGIN
    SELECT c.jsonb INTO doc
      FROM calendar_assignment a JOIN calendar c ON c.tenant_id = a.tenant_id AND c.id = a.calendar_id
     WHERE a.tenant_id = p_tenant AND a.service_point_id = p_sp AND p_day BETWEEN a.start_date AND a.end_date
     LIMIT 1;
    IF doc IS NOT NULL THEN
        SELECT x INTO exc FROM jsonb_array_elements(coalesce(doc -> 'exceptions', '[]')) x
         WHERE p_day BETWEEN calendar_date(x ->> 'startDate') AND calendar_date(x ->> 'endDate') LIMIT 1;
    END IF;
    IF exc IS NOT NULL THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object('startTime', s::text, 'endTime', e::text) ORDER BY s), '[]') INTO openings
          FROM (SELECT CASE WHEN calendar_date(o ->> 'startDate') = p_day THEN calendar_time(o ->> 'startTime') ELSE time '00:00' END AS s,
                       CASE WHEN calendar_date(o ->> 'endDate') = p_day THEN calendar_time(o ->> 'endTime') ELSE time '23:59' END AS e
                  FROM jsonb_array_elements(coalesce(exc -> 'openings', '[]')) o
                 WHERE p_day BETWEEN calendar_date(o ->> 'startDate') AND calendar_date(o ->> 'endDate')) r;
    ELSIF doc IS NOT NULL THEN
        SELECT coalesce(jsonb_agg(jsonb_build_object('startTime', s::text, 'endTime', e::text) ORDER BY s), '[]') INTO openings
          FROM (SELECT time '00:00' + make_interval(mins => greatest(lower(w.minutes), minute) - minute) AS s,
                       time '00:00' + make_interval(mins => least(upper(w.minutes), minute + 1440) - 1 - minute) AS e
                  FROM calendar_week_minutes(doc) w
                 WHERE w.minutes && int4range(minute, minute + 1440)) r;
    ELSE
        openings := '[]';
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object('date', p_day::text,
        'allDay', jsonb_array_length(openings) = 0
                  OR (jsonb_array_length(openings) = 1 AND openings #>> '{0,startTime}' = '00:00:00' AND openings #>> '{0,endTime}' = '23:59:00'),
        'open', jsonb_array_length(openings) > 0,
        'exceptional', exc IS NOT NULL,
        'exceptionName', exc ->> 'name',
        'openings', openings));
END
$$;

-- calendar_open_day is the nearest day on which a service point is open,
-- from p_day on (p_step 1) or back (p_step -1), p_day included; NULL when
-- none of its calendars opens again that way.
CREATE FUNCTION calendar_open_day(p_tenant text, p_sp uuid, p_day date, p_step integer) RETURNS date
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    first date;
    last date;
    day date := p_day;
BEGIN
    SELECT min(start_date), max(end_date) INTO first, last FROM calendar_assignment
     WHERE tenant_id = p_tenant AND service_point_id = p_sp;
    WHILE day BETWEEN first AND last OR (p_step > 0 AND day < first) OR (p_step < 0 AND day > last) LOOP
        IF (calendar_day(p_tenant, p_sp, day) ->> 'open')::boolean THEN
            RETURN day;
        END IF;
        day := CASE WHEN p_step > 0 THEN greatest(day, first - 1) + 1 ELSE least(day, last + 1) - 1 END;
    END LOOP;
    RETURN NULL;
END
$$;

-- calendar_surrounding is mod-calendar's surrounding openings of a date:
-- the nearest open day before it, the date, the nearest open day after
-- it (a closed day the day before or after when there is none).
CREATE FUNCTION calendar_surrounding(p_tenant text, p_sp uuid, p_day date) RETURNS jsonb
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT jsonb_build_object('openings', jsonb_build_array(
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day - 1, -1), p_day - 1)),
        calendar_day(p_tenant, p_sp, p_day),
        calendar_day(p_tenant, p_sp, coalesce(calendar_open_day(p_tenant, p_sp, p_day + 1, 1), p_day + 1))))
$$;

-- calendar_zone is the tenant's time zone (its locale settings'
-- timezone, FOLIO's), UTC when it names none PostgreSQL knows.
CREATE FUNCTION calendar_zone(p_tenant text) RETURNS text
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    zone text;
BEGIN
    SELECT jsonb #>> '{value,timezone}' INTO zone FROM setting
     WHERE tenant_id = p_tenant AND scope = 'stripes-core.prefs.manage' AND key = 'tenantLocaleSettings';
    IF zone IS NULL THEN
        RETURN 'UTC';
    END IF;
    PERFORM now() AT TIME ZONE zone;
    RETURN zone;
EXCEPTION WHEN OTHERS THEN
    RETURN 'UTC';
END
$$;

-- calendar_open is when a service point is open from one date to another
-- (in zone): each day's openings, from their start to their end (an
-- opening ending at 23:59 runs to midnight, so a library open through the
-- night is open through it).
CREATE FUNCTION calendar_open(p_tenant text, p_sp uuid, p_from date, p_to date, p_zone text) RETURNS tstzmultirange
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce(range_agg(tstzrange((d.day + (o ->> 'startTime')::time) AT TIME ZONE p_zone,
                                        CASE WHEN (o ->> 'endTime')::time = time '23:59' THEN (d.day + 1 + time '00:00') AT TIME ZONE p_zone
                                             ELSE (d.day + (o ->> 'endTime')::time) AT TIME ZONE p_zone END)),
                    '{}'::tstzmultirange)
      FROM (SELECT p_from + i AS day FROM generate_series(0, p_to - p_from) AS i) d,
           jsonb_array_elements(calendar_day(p_tenant, p_sp, d.day) -> 'openings') o
$$;

-- calendar_open_minutes is how many minutes a service point is open from
-- one time to another (each end truncated to the minute): an overdue
-- fine's minutes when its policy does not count closed days
-- (countClosed false). NULL for a service point with no calendar.
CREATE FUNCTION calendar_open_minutes(p_tenant text, p_sp uuid, p_from timestamptz, p_to timestamptz) RETURNS integer
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    zone text;
    first date;
    last date;
    total interval;
BEGIN
    SELECT min(start_date), max(end_date) INTO first, last FROM calendar_assignment
     WHERE tenant_id = p_tenant AND service_point_id = p_sp;
    IF first IS NULL OR p_from IS NULL OR p_to IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_to <= p_from THEN
        RETURN 0;
    END IF;
    zone := calendar_zone(p_tenant);
    SELECT coalesce(sum(upper(r) - lower(r)), interval '0') INTO total
      FROM unnest(calendar_open(p_tenant, p_sp, greatest(first, (p_from AT TIME ZONE zone)::date),
                                least(last, (p_to AT TIME ZONE zone)::date), zone)
                  * tstzmultirange(tstzrange(date_trunc('minute', p_from), date_trunc('minute', p_to)))) AS r;
    RETURN floor(extract(epoch FROM total) / 60);
END
$$;

-- calendar_moved is where a time (p_at: a due date, a hold shelf's
-- expiration) on a closed day or hour moves by FOLIO's closed library
-- date management (p_strategy: a loan policy's
-- closedLibraryDueDateManagementId, a service point's
-- holdShelfClosedLibraryDateManagement), for a period of minutes or hours
-- (p_short) or longer, p_offset after an opening (a policy's
-- openingTimeOffset), asked at p_now:
--   KEEP_THE_CURRENT_DUE_DATE_TIME (and none): p_at;
--   KEEP_THE_CURRENT_DUE_DATE: the end of p_at's day;
--   MOVE_TO_THE_END_OF_THE_PREVIOUS_OPEN_DAY, _NEXT_OPEN_DAY: the end of
--     p_at's day when the service point is open that day, else of the
--     nearest open day before or after it;
--   MOVE_TO_END_OF_CURRENT_SERVICE_POINT_HOURS (short): p_at when open
--     then, else the end of the hours open at p_now (or of the next);
--   MOVE_TO_BEGINNING_OF_NEXT_OPEN_SERVICE_POINT_HOURS (short): p_at when
--     open then, else the next opening after it plus p_offset, or the end
--     of that opening when the offset runs past it.
-- A service point with no calendar is open always: p_at stays. So does a
-- time that no open day or hour of the service point's calendars can take
-- (FOLIO refuses the loan: "Calendar timetable is absent").
CREATE FUNCTION calendar_moved(p_tenant text, p_sp uuid, p_at timestamptz, p_strategy text, p_short boolean,
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

-- loan_due_date is a loan's due date p_due (made at p_now at service
-- point p_sp) moved by its loan policy (p_policy, the document).
CREATE FUNCTION loan_due_date(p_tenant text, p_sp uuid, p_due timestamptz, p_policy jsonb, p_now timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT calendar_moved(p_tenant, p_sp, p_due, p_policy #>> '{loansPolicy,closedLibraryDueDateManagementId}',
                          coalesce(p_policy #>> '{loansPolicy,period,intervalId}', 'Days') IN ('Minutes', 'Hours'),
                          CASE WHEN p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}' IN ('Minutes', 'Hours')
                                AND (p_policy #>> '{loansPolicy,openingTimeOffset,duration}') ~ '^\d{1,6}$'
                               THEN ((p_policy #>> '{loansPolicy,openingTimeOffset,duration}') || ' ' ||
                                     (p_policy #>> '{loansPolicy,openingTimeOffset,intervalId}'))::interval END,
                          p_now)
$$;
