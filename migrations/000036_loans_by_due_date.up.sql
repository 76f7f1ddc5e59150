-- The sweeper ages long-overdue loans to lost (FOLIO's lost item fee
-- policy's itemAgedLostOverdue): it finds the open loans due before now
-- through this index, as it finds requests past their hold shelf date
-- (migration 23): a pass with nothing overdue is one index probe.
CREATE INDEX loan_open_due_idx ON loan ((jsonb ->> 'dueDate')) WHERE status_name = 'Open';
