-- A stored date is read by one rule, schemas.DateTimePattern's: RFC 3339
-- with an offset from -18:00 to +18:00 whose minutes run 00 to 59, the
-- rule every record is held to when it is written. PostgreSQL's own input
-- takes more: "now", "epoch", "today", dates without an offset (read in
-- the session's time zone) and offsets such as +24:00. Such a value,
-- stored before the rule or written in SQL, is read as a date that cannot
-- be read (migration 15): NULL, with a warning naming the field. The
-- pattern below is DateTimePattern's very text (a test holds them to it).
CREATE OR REPLACE FUNCTION stored_time(value text, field text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL UNSAFE AS $$
DECLARE
    t timestamptz;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    -- The offset is applied here, not by PostgreSQL's input, which
    -- takes offsets only to ±15:59.
    IF value ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-]((0[0-9]|1[0-7]):[0-5][0-9]|18:00))$' THEN
        BEGIN
            IF upper(right(value, 1)) = 'Z' THEN
                t := upper(left(value, -1))::timestamp AT TIME ZONE 'UTC';
            ELSE
                t := (upper(left(value, -6))::timestamp AT TIME ZONE 'UTC') - right(value, 6)::interval;
            END IF;
        EXCEPTION WHEN data_exception THEN
            t := NULL;
        END;
    END IF;
    IF t IS NULL OR extract(year FROM t AT TIME ZONE 'UTC') NOT BETWEEN 1900 AND 9999 THEN
        RAISE WARNING 'stored % "%" cannot be read as a date; read as absent', field, left(value, 100);
        RETURN NULL;
    END IF;
    RETURN t;
END $$;
