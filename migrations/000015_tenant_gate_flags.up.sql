-- Whether a tenant has ever had manual blocks, automated block limits or
-- requests, kept by the writes that create them: a check-out of a tenant
-- that has none (most of them: many libraries use none of the three) reads
-- these flags on the tenant's row instead of looking for a patron's blocks,
-- the patron group's limits and the item's queue, each of which would find
-- nothing. A flag is set in the transaction that writes the first such
-- record, so a check-out that could see the record sees the flag; it is
-- never cleared (a tenant that once had them looks for them), but with the
-- tenant's purge.
ALTER TABLE tenant
    ADD COLUMN has_manual_blocks boolean NOT NULL DEFAULT false,
    ADD COLUMN has_block_limits  boolean NOT NULL DEFAULT false,
    ADD COLUMN has_requests      boolean NOT NULL DEFAULT false;

-- Each table read once (migration 13 left no index by tenant).
UPDATE tenant t SET has_manual_blocks = t.id IN (SELECT tenant_id FROM manual_block),
                    has_block_limits  = t.id IN (SELECT tenant_id FROM patron_block_limit),
                    has_requests      = t.id IN (SELECT tenant_id FROM request);

-- One statement per write statement, whatever the rows it wrote; the
-- tenant's row changes once, on the first.
CREATE FUNCTION tenant_has_manual_blocks() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE tenant SET has_manual_blocks = true WHERE id IN (SELECT tenant_id FROM written) AND NOT has_manual_blocks;
    RETURN NULL;
END
$$;
CREATE TRIGGER tenant_has_manual_blocks AFTER INSERT ON manual_block
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tenant_has_manual_blocks();

CREATE FUNCTION tenant_has_block_limits() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE tenant SET has_block_limits = true WHERE id IN (SELECT tenant_id FROM written) AND NOT has_block_limits;
    RETURN NULL;
END
$$;
CREATE TRIGGER tenant_has_block_limits AFTER INSERT ON patron_block_limit
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tenant_has_block_limits();

CREATE FUNCTION tenant_has_requests() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE tenant SET has_requests = true WHERE id IN (SELECT tenant_id FROM written) AND NOT has_requests;
    RETURN NULL;
END
$$;
CREATE TRIGGER tenant_has_requests AFTER INSERT ON request
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tenant_has_requests();
