DROP TABLE kiosk_presence;
