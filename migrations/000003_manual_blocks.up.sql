-- Manual patron blocks (FOLIO's /manualblocks): a block with borrowing
-- true, not yet expired, refuses the patron's check-outs. A block names its
-- patron with the tenant, so a patron with blocks is not deleted under
-- them, and the check-out's validation finds a patron's blocks by index.
CREATE TABLE manual_block (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    user_id   uuid GENERATED ALWAYS AS ((jsonb ->> 'userId')::uuid) STORED NOT NULL,
    CONSTRAINT manual_block_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT manual_block_user_fkey FOREIGN KEY (tenant_id, user_id) REFERENCES patron (tenant_id, id)
);

-- Led by the patron, then the tenant, as the loan indexes are (migration 2).
CREATE INDEX manual_block_user_id_idx ON manual_block (user_id, tenant_id);
