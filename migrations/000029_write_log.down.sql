DROP TABLE write_log;
