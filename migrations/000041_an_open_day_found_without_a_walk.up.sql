-- calendar_open_day walked from its day one day at a time, reading each
-- day's hours, until a day was open or the service point's calendars
-- ended. A calendar without hours from 2026 to 9999 (FOLIO takes any
-- dates) made every due date moved off a closed day, and every
-- surrounding-openings read, walk nearly three million days: the
-- statement ran until it timed out. It now reads each calendar of the
-- service point once: the first day (the last, going back) an
-- exception's opening covers, and the first day of each stretch no
-- exception covers on a weekday its normal hours open, which is one of
-- the stretch's first seven. What it answers is unchanged.
CREATE OR REPLACE FUNCTION calendar_open_day(p_tenant text, p_sp uuid, p_day date, p_step integer) RETURNS date
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN (
    WITH cal AS (
        -- The service point's calendars on p_day's side, p_day included,
        -- each cut to that side.
        SELECT c.id, c.jsonb AS doc,
               -- The weekdays (ISO numbers) its normal hours open.
               ARRAY(SELECT DISTINCT d FROM calendar_week_minutes(c.jsonb) w, generate_series(1, 7) d
                      WHERE w.minutes && int4range((d - 1) * 1440, d * 1440)) AS weekdays,
               daterange(CASE WHEN p_step > 0 THEN greatest(a.start_date, p_day) ELSE a.start_date END,
                         CASE WHEN p_step > 0 THEN a.end_date ELSE least(a.end_date, p_day) END, '[]') AS days
          FROM calendar_assignment a JOIN calendar c ON c.tenant_id = a.tenant_id AND c.id = a.calendar_id
         WHERE a.tenant_id = p_tenant AND a.service_point_id = p_sp
           AND CASE WHEN p_step > 0 THEN a.end_date >= p_day ELSE a.start_date <= p_day END
    ), exception AS (
        SELECT cal.id, cal.days, x,
               daterange(calendar_date(x ->> 'startDate'), calendar_date(x ->> 'endDate'), '[]') AS days_off
          FROM cal, jsonb_array_elements(coalesce(cal.doc -> 'exceptions', '[]')) x
    ), days_off AS (
        SELECT id, range_agg(days_off) AS days_off FROM exception GROUP BY id
    ), open_days AS (
        -- Days an exception's opening covers.
        SELECT daterange(calendar_date(o ->> 'startDate'), calendar_date(o ->> 'endDate'), '[]') * e.days AS days
          FROM exception e, jsonb_array_elements(coalesce(e.x -> 'openings', '[]')) o
        UNION ALL
        -- The first seven days of each stretch no exception covers, those
        -- on a weekday its normal hours open.
        SELECT daterange(day.d, day.d, '[]')
          FROM cal LEFT JOIN days_off ON days_off.id = cal.id,
               unnest(datemultirange(cal.days) - coalesce(days_off.days_off, '{}'::datemultirange)) AS stretch,
               generate_series(0, 6) AS i,
               LATERAL (SELECT CASE WHEN p_step > 0 THEN lower(stretch) + i ELSE upper(stretch) - 1 - i END AS d) day
         WHERE cardinality(cal.weekdays) > 0 AND day.d <@ stretch AND extract(isodow FROM day.d)::integer = ANY (cal.weekdays)
    )
    SELECT CASE WHEN p_step > 0 THEN min(lower(days)) ELSE max(upper(days) - 1) END
      FROM open_days WHERE NOT isempty(days));
END
$$;
