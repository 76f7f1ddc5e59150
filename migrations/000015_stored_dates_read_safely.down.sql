DROP FUNCTION stored_time(text, text);
