DROP TABLE check_out_lock_waiter;
