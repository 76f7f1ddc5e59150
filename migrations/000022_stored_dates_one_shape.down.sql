CREATE OR REPLACE FUNCTION stored_time(value text, field text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL UNSAFE AS $$
DECLARE
    t timestamptz;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        t := value::timestamptz;
    EXCEPTION WHEN data_exception THEN
        t := NULL;
    END;
    IF t IS NULL OR extract(year FROM t AT TIME ZONE 'UTC') NOT BETWEEN 1900 AND 9999 THEN
        RAISE WARNING 'stored % "%" cannot be read as a date; read as absent', field, left(value, 100);
        RETURN NULL;
    END IF;
    RETURN t;
END $$;
