-- The tenants' views of the tables this migration added go with them.
DROP FUNCTION loan_due_date(text, uuid, timestamptz, jsonb, timestamptz);
DROP FUNCTION calendar_moved(text, uuid, timestamptz, text, boolean, interval, timestamptz);
DROP FUNCTION calendar_open_minutes(text, uuid, timestamptz, timestamptz);
DROP FUNCTION calendar_open(text, uuid, date, date, text);
DROP FUNCTION calendar_zone(text);
DROP FUNCTION calendar_surrounding(text, uuid, date);
DROP FUNCTION calendar_open_day(text, uuid, date, integer);
DROP FUNCTION calendar_day(text, uuid, date);
DROP TABLE calendar_assignment CASCADE;
DROP TABLE calendar CASCADE;
DROP FUNCTION calendar_checked();
DROP FUNCTION calendar_week_minutes(jsonb);
DROP FUNCTION calendar_refused(text, text);
DROP FUNCTION calendar_time(text);
DROP FUNCTION calendar_date(text);
DROP FUNCTION calendar_weekday(text);
