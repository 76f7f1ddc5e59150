DROP TABLE request;
