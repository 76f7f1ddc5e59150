-- calendar_open_day as migration 35 made it: a walk from the day, one
-- day at a time.
CREATE OR REPLACE FUNCTION calendar_open_day(p_tenant text, p_sp uuid, p_day date, p_step integer) RETURNS date
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
