-- A stored date that cannot be read must not lock a patron out. Storage
-- refuses a record whose date is outside the years 1900 to 9999 or is no
-- date at all (the schemas' date-time, schemas.ParseDateTime), but a value
-- stored before that rule, or written in SQL (an import), would make every
-- statement that computes with it fail (SQLSTATE 22008, "date out of
-- range", for year 0000): every check-out and summary of the patron
-- answered 500.
--
-- stored_time reads a stored date by the same rule: one that PostgreSQL
-- cannot read, or outside the years 1900 to 9999 in UTC, is NULL, and a
-- warning names the field and the value (storage logs the session's
-- warnings). The statements read NULL as what keeps the patron served and
-- the library safe: a manual block whose expiry cannot be read is in force
-- until removed, a loan whose due date cannot be read is not counted
-- overdue, and a patron whose expiry cannot be read does not expire. Its
-- exception block is a subtransaction, which a parallel worker may not
-- start: PARALLEL UNSAFE.
CREATE FUNCTION stored_time(value text, field text) RETURNS timestamptz
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
