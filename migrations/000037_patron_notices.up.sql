-- Patron notices, as FOLIO keeps them: notice policies (mod-circulation-
-- storage's patron-notice-policies, chosen by the circulation rules' n),
-- templates (mod-template-engine's), and the notices scheduled from them
-- (scheduled-notice-storage's), sent by storage's notice sender; and a
-- fee/fine's charge notice (its type's chargeNoticeId, else its owner's
-- defaultChargeNoticeId: mod-feesfines').
--
-- What a notice is scheduled from is recorded by the write that makes it
-- happen, in its own transaction: the triggers below add a row to
-- notice_change for each change of a loan or a request a notice policy can
-- name (a check-out, a check-in, a renewal, a due date moved, a request
-- placed, made ready for pickup, cancelled or expired), only for a tenant
-- that has a notice policy, and of each fee/fine charged, only for a tenant
-- that has a template. The sender takes each change once: it writes
-- the notices the change calls for and deletes the change in one
-- transaction.
CREATE TABLE patron_notice_policy (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT patron_notice_policy_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT patron_notice_policy_name_key UNIQUE (tenant_id, name),
    CONSTRAINT patron_notice_policy_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE notice_template (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT notice_template_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT notice_template_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

ALTER TABLE circulation_rule_fee
    ADD COLUMN notice_policy_id uuid,
    ADD CONSTRAINT circulation_rule_notice_policy_fkey
        FOREIGN KEY (tenant_id, notice_policy_id) REFERENCES patron_notice_policy (tenant_id, id);
ALTER TABLE circulation_rules_fee
    ADD COLUMN fallback_notice_policy_id uuid,
    ADD CONSTRAINT circulation_rules_fallback_notice_policy_fkey
        FOREIGN KEY (tenant_id, fallback_notice_policy_id) REFERENCES patron_notice_policy (tenant_id, id);

-- A notice scheduled: FOLIO's scheduled notice (recipientUserId, loanId or
-- requestId, triggeringEvent, nextRunTime, noticeConfig) with what became
-- of it (status: Scheduled, Sent, No email, Failed, Obsolete; attempts,
-- lastError, sentDate). next_run_at is when it is due, retry_at when a
-- failed send is tried again; seq orders one patron's notices due at one
-- time as they were scheduled.
CREATE TABLE scheduled_notice (
    tenant_id    text NOT NULL,
    id           uuid NOT NULL,
    jsonb        jsonb NOT NULL,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    next_run_at  timestamptz NOT NULL,
    retry_at     timestamptz,
    recipient_id uuid GENERATED ALWAYS AS ((jsonb ->> 'recipientUserId')::uuid) STORED NOT NULL,
    loan_id      uuid GENERATED ALWAYS AS ((jsonb ->> 'loanId')::uuid) STORED,
    fee_fine_id  uuid GENERATED ALWAYS AS ((jsonb ->> 'feeFineId')::uuid) STORED,
    request_id   uuid GENERATED ALWAYS AS ((jsonb ->> 'requestId')::uuid) STORED,
    status       text GENERATED ALWAYS AS (jsonb ->> 'status') STORED NOT NULL,
    CONSTRAINT scheduled_notice_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT scheduled_notice_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);
-- The sender finds what is due, of every tenant, by the time it is due
-- (or tried again), and a patron's earlier notices by the patron.
CREATE INDEX scheduled_notice_due_idx ON scheduled_notice ((coalesce(retry_at, next_run_at))) WHERE status = 'Scheduled';
CREATE INDEX scheduled_notice_recipient_idx ON scheduled_notice (tenant_id, recipient_id, next_run_at, seq) WHERE status = 'Scheduled';
-- The console lists a tenant's notices by status (the dead letters).
CREATE INDEX scheduled_notice_status_idx ON scheduled_notice (tenant_id, status, next_run_at, seq);
CREATE INDEX scheduled_notice_loan_idx ON scheduled_notice (tenant_id, loan_id) WHERE loan_id IS NOT NULL;
CREATE INDEX scheduled_notice_request_idx ON scheduled_notice (tenant_id, request_id) WHERE request_id IS NOT NULL;

CREATE TABLE notice_change (
    pos        bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id  text NOT NULL,
    kind       text NOT NULL,
    record_id  uuid NOT NULL,
    event      text NOT NULL,
    record     jsonb NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notice_change_pkey PRIMARY KEY (pos),
    CONSTRAINT notice_change_kind_check CHECK (kind IN ('loan', 'request', 'feefine'))
);

-- notice_event names what a loan's or a request's change is to a notice
-- policy (FOLIO's NoticeEventType), and a fee/fine's creation its charge,
-- NULL when it is nothing: old is the record before (NULL for one
-- created), new after.
CREATE FUNCTION notice_event(kind text, old jsonb, new jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path FROM CURRENT AS $$
    SELECT CASE
        WHEN kind = 'feefine' THEN
            CASE WHEN old IS NULL THEN 'Fee/fine charged' END
        WHEN kind = 'loan' AND old IS NULL THEN
            CASE WHEN new #>> '{status,name}' = 'Open' THEN 'Check out' END
        WHEN kind = 'loan' THEN
            CASE WHEN old #>> '{status,name}' = 'Open' AND new #>> '{status,name}' = 'Closed' THEN 'Check in'
                 WHEN new #>> '{status,name}' <> 'Open' THEN NULL
                 WHEN coalesce((new ->> 'renewalCount')::numeric, 0) > coalesce((old ->> 'renewalCount')::numeric, 0) THEN 'Renewed'
                 WHEN coalesce(new ->> 'dueDateChangedByRecall', '') = 'true'
                      AND coalesce(old ->> 'dueDateChangedByRecall', '') <> 'true' THEN 'Item recalled'
                 WHEN new ->> 'dueDate' IS DISTINCT FROM old ->> 'dueDate' THEN 'Due date changed'
            END
        WHEN old IS NULL THEN
            CASE new ->> 'requestType' WHEN 'Page' THEN 'Paging request' WHEN 'Hold' THEN 'Hold request'
                                       WHEN 'Recall' THEN 'Recall request' END
        WHEN new ->> 'status' IS DISTINCT FROM old ->> 'status' THEN
            CASE new ->> 'status' WHEN 'Open - Awaiting pickup' THEN 'Available'
                                  WHEN 'Closed - Cancelled' THEN 'Request cancellation'
                                  WHEN 'Closed - Unfilled' THEN 'Request expiration'
                                  WHEN 'Closed - Pickup expired' THEN 'Hold expiration' END
        WHEN new ->> 'holdShelfExpirationDate' IS DISTINCT FROM old ->> 'holdShelfExpirationDate'
          OR new ->> 'requestExpirationDate' IS DISTINCT FROM old ->> 'requestExpirationDate' THEN 'Request dates changed'
    END
$$;

CREATE FUNCTION notice_change_record() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    event text;
    told  boolean;
BEGIN
    event := notice_event(TG_ARGV[0], CASE WHEN TG_OP = 'UPDATE' THEN OLD.jsonb END, NEW.jsonb);
    IF event IS NULL THEN
        RETURN NULL;
    END IF;
    IF TG_ARGV[0] = 'feefine' THEN
        told := EXISTS (SELECT 1 FROM notice_template WHERE tenant_id = NEW.tenant_id);
    ELSE
        told := EXISTS (SELECT 1 FROM patron_notice_policy WHERE tenant_id = NEW.tenant_id);
    END IF;
    IF told THEN
        INSERT INTO notice_change (tenant_id, kind, record_id, event, record)
        VALUES (NEW.tenant_id, TG_ARGV[0], NEW.id, event, NEW.jsonb);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER loan_notice_change AFTER INSERT OR UPDATE ON loan
    FOR EACH ROW EXECUTE FUNCTION notice_change_record('loan');
CREATE TRIGGER request_notice_change AFTER INSERT OR UPDATE ON request
    FOR EACH ROW EXECUTE FUNCTION notice_change_record('request');
CREATE TRIGGER fee_fine_account_notice_change AFTER INSERT ON fee_fine_account
    FOR EACH ROW EXECUTE FUNCTION notice_change_record('feefine');
