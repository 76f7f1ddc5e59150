DROP TRIGGER request_outbox ON request;
DROP TRIGGER item_outbox ON item;
DROP TRIGGER loan_outbox ON loan;
DROP TABLE outbox_tenant;
DROP TABLE outbox_commit;
DROP TABLE outbox;
DROP FUNCTION outbox_commit_events();
DROP FUNCTION outbox_record();
