DROP INDEX loan_open_due_idx;
