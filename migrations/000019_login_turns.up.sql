-- A count of sign-ins or PINs keeps the attempts being checked apart from
-- the wrong secrets: failures now counts only secrets checked and wrong;
-- checking counts the attempts admitted and not yet settled (the last at
-- checking_at), which hold a place under the limit while they are
-- checked and give it back when they end. A right secret costs nothing,
-- so a crowd of right ones from one place all get in, each in its turn.
--
-- A count written before counted its attempts being checked as failures
-- and gave them back when they succeeded; what it holds now is failures
-- and attempts given back, as before.
ALTER TABLE login_failure
    ADD COLUMN checking integer NOT NULL DEFAULT 0,
    ADD COLUMN checking_at timestamptz;

-- The sweeper deletes counts whose window has passed: first_at, which
-- it compares, is indexed beside the rest of the key.
CREATE INDEX login_failure_first_at_idx ON login_failure (first_at);
