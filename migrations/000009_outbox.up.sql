-- Domain events (a transactional outbox): every write that changes a loan,
-- an item's status or a request records its event here, in the same
-- transaction, by the triggers below; a check-out and a check-in record
-- one more naming what happened. A rolled-back write leaves no event, a
-- committed one exactly one per change. A session with
-- checkoutlock.outbox = 'off' (a purge, a bulk load) records nothing.
--
-- A write only inserts, and takes no lock another write waits for: its
-- events, and at commit (a deferred trigger) one row for the transaction
-- (outbox_commit), whose pos is taken then, after everything the
-- transaction waited for. The relay, one session of one instance at a
-- time, numbers the commits it finds, each tenant's from 1 without a gap,
-- in pos order: a transaction that waited for another's row commits after
-- it, so it is found with it or after it, and numbered after it. Then it
-- publishes the events in number order and moves the tenant's published
-- mark. Published events go after the retention.
CREATE TABLE outbox (
    tenant_id  text NOT NULL,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- pos orders a transaction's events as they were recorded.
    pos        bigint GENERATED ALWAYS AS IDENTITY,
    id         uuid NOT NULL DEFAULT gen_random_uuid(),
    kind       text NOT NULL,
    type       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    data       jsonb NOT NULL,
    CONSTRAINT outbox_pkey PRIMARY KEY (tenant_id, xid, pos)
);

-- A committed transaction's events of a tenant; the relay numbers them
-- seq to seq + events - 1, in their pos order.
CREATE TABLE outbox_commit (
    pos          bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id    text NOT NULL,
    xid          xid8 NOT NULL,
    events       integer NOT NULL,
    seq          bigint,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT outbox_commit_pkey PRIMARY KEY (pos)
);

CREATE INDEX outbox_commit_unnumbered_idx ON outbox_commit (pos) WHERE seq IS NULL;
CREATE INDEX outbox_commit_seq_idx ON outbox_commit (tenant_id, seq);

-- A tenant's last event number given and last published: the relay's.
CREATE TABLE outbox_tenant (
    tenant_id text NOT NULL,
    numbered  bigint NOT NULL,
    published bigint NOT NULL DEFAULT 0,
    CONSTRAINT outbox_tenant_pkey PRIMARY KEY (tenant_id)
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

-- A transaction whose checkoutlock.outbox is 'own' records its events
-- and its commit itself, in its statements (a check-out's write); 'off'
-- records none.
CREATE TRIGGER loan_outbox AFTER INSERT OR UPDATE OR DELETE ON loan
    FOR EACH ROW WHEN (coalesce(current_setting('checkoutlock.outbox', true), '') NOT IN ('off', 'own'))
    EXECUTE FUNCTION outbox_record('loan');
CREATE TRIGGER item_outbox AFTER INSERT OR UPDATE OR DELETE ON item
    FOR EACH ROW WHEN (coalesce(current_setting('checkoutlock.outbox', true), '') NOT IN ('off', 'own'))
    EXECUTE FUNCTION outbox_record('item');
CREATE TRIGGER request_outbox AFTER INSERT OR UPDATE OR DELETE ON request
    FOR EACH ROW WHEN (coalesce(current_setting('checkoutlock.outbox', true), '') NOT IN ('off', 'own'))
    EXECUTE FUNCTION outbox_record('request');

-- outbox_commit_events records, at commit, the transaction's events of a
-- tenant: the first call for the tenant does it (and notes so in the
-- transaction's checkoutlock.outbox_committed), the others return.
CREATE FUNCTION outbox_commit_events() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    done text := coalesce(current_setting('checkoutlock.outbox_committed', true), '');
    mark text := '|' || NEW.xid::text || ':' || NEW.tenant_id || '|';
BEGIN
    IF strpos(done, mark) > 0 THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('checkoutlock.outbox_committed', done || mark, true);
    INSERT INTO outbox_commit (tenant_id, xid, events)
    SELECT NEW.tenant_id, NEW.xid, count(*) FROM outbox WHERE tenant_id = NEW.tenant_id AND xid = NEW.xid;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER outbox_commit_events AFTER INSERT ON outbox
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (coalesce(current_setting('checkoutlock.outbox', true), '') <> 'own')
    EXECUTE FUNCTION outbox_commit_events();
