-- The sweeper finds each kind of its work through an index on the time it
-- is due. Sessions are swept a day after they expire or after they ended:
-- an ended session had no index on its end, so each pass read every
-- session of every tenant to find the ended ones (with sequential scans
-- off, an index scan of all of them).
CREATE INDEX login_session_ended_at_idx ON login_session (ended_at) WHERE ended_at IS NOT NULL;
