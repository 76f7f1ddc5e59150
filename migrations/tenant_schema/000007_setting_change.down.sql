DROP TABLE IF EXISTS setting_change;
