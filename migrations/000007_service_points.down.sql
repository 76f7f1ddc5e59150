DROP TABLE service_point;
