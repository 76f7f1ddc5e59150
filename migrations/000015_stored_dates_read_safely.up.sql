-- A stored date that cannot be read must not lock a patron out. Storage
-- refuses a record whose date is outside the years 1900 to 9999 or is no
-- date at all (the schemas' date-time), but a value stored before that
-- rule, or written in SQL (an import), would make every statement that
-- computes with it fail (SQLSTATE 22008, "date out of range", for year
-- 0000): every check-out and summary of the patron answered 500.
--
-- stored_time reads a stored date; one that cannot be read is NULL, and a
-- warning names the field and the value (storage logs the session's
-- warnings). The statements read NULL as what keeps the patron served and
-- the library safe: a manual block whose expiry cannot be read is in force
-- until removed, a loan whose due date cannot be read is not counted
-- overdue, and a patron whose expiry cannot be read does not expire.
CREATE FUNCTION stored_time(value text, field text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN value::timestamptz;
EXCEPTION WHEN data_exception THEN
    RAISE WARNING 'stored % "%" cannot be read as a date; read as absent', field, left(value, 100);
    RETURN NULL;
END $$;
