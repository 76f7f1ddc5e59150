DROP TABLE patron_pin;
