-- The queues put right stay right: nothing to undo.
SELECT 1;
