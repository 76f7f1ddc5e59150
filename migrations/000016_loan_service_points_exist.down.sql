DROP TRIGGER loan_service_points_exist ON loan;
DROP FUNCTION loan_service_points_exist();
