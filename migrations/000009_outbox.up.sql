-- Domain events (a transactional outbox): every write that changes a loan,
-- an item's status or a request records its event here, in the same
-- transaction, by the triggers below; a check-out and a check-in record
-- one more naming what happened. A rolled-back write leaves no event, a
-- committed one exactly one per change. The relay publishes them per
-- tenant in seq order, which is commit order: seq is given at commit, by a
-- deferred trigger that takes the tenant's outbox_sequence row last of
-- all, so a transaction's events are numbered only once every earlier
-- committer of the tenant has finished, and nothing waits on the row
-- while holding another. A session with checkoutlock.outbox = 'off' (a
-- purge, a bulk load) records nothing.
CREATE TABLE outbox (
    tenant_id    text NOT NULL,
    id           uuid NOT NULL DEFAULT gen_random_uuid(),
    -- pos orders a transaction's events as they were recorded.
    pos          bigserial NOT NULL,
    seq          bigint,
    kind         text NOT NULL,
    type         text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    data         jsonb NOT NULL,
    published_at timestamptz,
    CONSTRAINT outbox_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT outbox_seq_key UNIQUE (tenant_id, seq)
);

CREATE INDEX outbox_pending_idx ON outbox (tenant_id, seq) WHERE published_at IS NULL;
CREATE INDEX outbox_unsequenced_idx ON outbox (tenant_id, pos) WHERE seq IS NULL;
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;

CREATE TABLE outbox_sequence (
    tenant_id text NOT NULL,
    last      bigint NOT NULL,
    CONSTRAINT outbox_sequence_pkey PRIMARY KEY (tenant_id)
);

-- outbox_record records a loan's, an item's (when its status changes) or
-- a request's change: FOLIO's {old, new}, type CREATED, UPDATED or
-- DELETED. TG_ARGV[0] names the kind.
CREATE FUNCTION outbox_record() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF coalesce(current_setting('checkoutlock.outbox', true), '') = 'off' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (NEW.tenant_id, TG_ARGV[0], 'CREATED', jsonb_build_object('old', NULL, 'new', NEW.jsonb));
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (OLD.tenant_id, TG_ARGV[0], 'DELETED', jsonb_build_object('old', OLD.jsonb, 'new', NULL));
    ELSIF OLD.jsonb IS DISTINCT FROM NEW.jsonb
          AND (TG_ARGV[0] <> 'item' OR (OLD.jsonb #>> '{status,name}') IS DISTINCT FROM (NEW.jsonb #>> '{status,name}')) THEN
        INSERT INTO outbox (tenant_id, kind, type, data)
        VALUES (NEW.tenant_id, TG_ARGV[0], 'UPDATED', jsonb_build_object('old', OLD.jsonb, 'new', NEW.jsonb));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER loan_outbox AFTER INSERT OR UPDATE OR DELETE ON loan
    FOR EACH ROW EXECUTE FUNCTION outbox_record('loan');
CREATE TRIGGER item_outbox AFTER INSERT OR UPDATE OR DELETE ON item
    FOR EACH ROW EXECUTE FUNCTION outbox_record('item');
CREATE TRIGGER request_outbox AFTER INSERT OR UPDATE OR DELETE ON request
    FOR EACH ROW EXECUTE FUNCTION outbox_record('request');

-- outbox_number numbers, at commit, the transaction's events of the
-- tenant that have no seq yet, in the order they were recorded, and tells
-- the relay; the first call of a transaction numbers them all.
CREATE FUNCTION outbox_number() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n    bigint;
    last bigint;
BEGIN
    SELECT count(*) INTO n FROM outbox WHERE tenant_id = NEW.tenant_id AND seq IS NULL;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox_sequence AS s (tenant_id, last) VALUES (NEW.tenant_id, n)
    ON CONFLICT (tenant_id) DO UPDATE SET last = s.last + n
    RETURNING s.last INTO last;
    UPDATE outbox o SET seq = last - n + r.k
      FROM (SELECT id, row_number() OVER (ORDER BY pos) AS k FROM outbox
             WHERE tenant_id = NEW.tenant_id AND seq IS NULL) r
     WHERE o.tenant_id = NEW.tenant_id AND o.id = r.id;
    PERFORM pg_notify('checkout_outbox', NEW.tenant_id);
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER outbox_number AFTER INSERT ON outbox
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION outbox_number();
