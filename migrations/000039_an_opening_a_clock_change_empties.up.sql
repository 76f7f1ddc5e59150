-- calendar_open made an opening's range from its local start and end on
-- the day, in the tenant's time zone. On the night a zone's clocks go
-- forward, a start in the hour skipped is taken as in the hour before
-- the change (PostgreSQL's reading of a local time that does not exist,
-- as Java's ZonedDateTime reads it), so it lands that much later: an
-- opening from 00:30 to 01:15 in Havana, whose clocks go from 00:00 to
-- 01:00, began at 01:30 and ended at 01:15, a range PostgreSQL refuses
-- to make, and every due date, hold shelf expiration and overdue fine
-- that read that day failed. Such an opening now has no time open: its
-- range is empty, as the zone's clocks leave it.
CREATE OR REPLACE FUNCTION calendar_open(p_tenant text, p_sp uuid, p_from date, p_to date, p_zone text) RETURNS tstzmultirange
    LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN (SELECT coalesce(range_agg(tstzrange(o.starts, greatest(o.starts, o.ends))), '{}'::tstzmultirange)
      FROM (SELECT p_from + i AS day FROM generate_series(0, p_to - p_from) AS i) d,
           jsonb_array_elements(calendar_day(p_tenant, p_sp, d.day) -> 'openings') x,
           LATERAL (SELECT (d.day + (x ->> 'startTime')::time) AT TIME ZONE p_zone AS starts,
                           CASE WHEN (x ->> 'endTime')::time = time '23:59' THEN (d.day + 1 + time '00:00') AT TIME ZONE p_zone
                                ELSE (d.day + (x ->> 'endTime')::time) AT TIME ZONE p_zone END AS ends) o);
END
$$;
