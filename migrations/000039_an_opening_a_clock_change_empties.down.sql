-- calendar_open as migration 38 made it: an opening a spring-forward
-- turns inside out is refused.
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
