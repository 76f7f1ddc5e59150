-- A tenant's check-out gate: a row here says the tenant has, or once had,
-- a manual block, a patron block limit or a request. Until it has one,
-- storage reads and writes a check-out without looking for any (lean
-- statements that do not name those tables), and each such statement reads
-- this row in its own snapshot: when it is there, the statement does
-- nothing and the full one runs instead. The row is written by the
-- transaction that writes the tenant's first block, limit or request, so
-- no statement can see the record without the row, and it is never taken
-- away (a tenant whose last block is removed keeps the full gate) except
-- by a purge of the tenant.
CREATE TABLE tenant_gate (
    tenant_id text PRIMARY KEY
);

CREATE FUNCTION tenant_gate_open() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- A row there already is left as it is; one a transaction is deleting
    -- (a purge) is waited for, and written again if it goes.
    INSERT INTO tenant_gate (tenant_id)
    SELECT DISTINCT n.tenant_id FROM new_rows n
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER manual_block_gate AFTER INSERT ON manual_block
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tenant_gate_open();
CREATE TRIGGER patron_block_limit_gate AFTER INSERT ON patron_block_limit
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tenant_gate_open();
CREATE TRIGGER request_gate AFTER INSERT ON request
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION tenant_gate_open();

INSERT INTO tenant_gate (tenant_id)
SELECT tenant_id FROM manual_block UNION SELECT tenant_id FROM patron_block_limit UNION SELECT tenant_id FROM request;
