-- Patrons' PINs (FOLIO's /patron-pin): a self-check machine may ask a
-- patron for theirs (SIP2's AD). A PIN is kept as an argon2id hash only,
-- and goes with its patron; failed verifications are counted with the
-- failed sign-ins (login_failure, key "pin:<patron id>"), so repeated
-- guesses lock a patron's PIN for a while, across every instance.
CREATE TABLE patron_pin (
    tenant_id  text NOT NULL,
    patron_id  uuid NOT NULL,
    hash       text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT patron_pin_pkey PRIMARY KEY (tenant_id, patron_id),
    CONSTRAINT patron_pin_patron_fkey FOREIGN KEY (tenant_id, patron_id) REFERENCES patron (tenant_id, id) ON DELETE CASCADE
);
