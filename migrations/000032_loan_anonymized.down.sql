DROP INDEX IF EXISTS loan_closed_named_idx;
-- user_id stays nullable: loans anonymized keep no borrower to restore.
