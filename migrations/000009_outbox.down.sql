DROP TRIGGER request_outbox ON request;
DROP TRIGGER item_outbox ON item;
DROP TRIGGER loan_outbox ON loan;
DROP TABLE outbox_sequence;
DROP TABLE outbox;
DROP FUNCTION outbox_number();
DROP FUNCTION outbox_record();
