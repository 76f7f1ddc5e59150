DROP INDEX request_hold_shelf_expiry;
