DROP TABLE check_out_lock_event;
ALTER TABLE check_out_lock DROP COLUMN previous;
ALTER TABLE check_out_lock DROP COLUMN holder;
