DROP TABLE IF EXISTS check_out_lock;
