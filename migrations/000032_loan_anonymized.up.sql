-- A closed loan may forget its borrower, anonymized as the tenant's loan
-- history settings say (mod-circulation's loan_history, FOLIO's way): its
-- userId is removed, so user_id is NULL. An open loan always names its
-- borrower (loan.json).
ALTER TABLE loan ALTER COLUMN user_id DROP NOT NULL;

-- The closed loans that still name their borrower: what anonymizing looks
-- through, a batch at a time.
CREATE INDEX loan_closed_named_idx ON loan (tenant_id, id) WHERE status_name = 'Closed' AND user_id IS NOT NULL;
