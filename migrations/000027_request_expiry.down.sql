DROP INDEX request_expiry;
