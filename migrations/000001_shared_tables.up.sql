-- Every tenant's records in one set of tables, in the schema
-- circulation_storage. A tenant's rows carry its id in tenant_id, the first
-- column of every primary key, uniqueness rule, reference and index that
-- serves a request, so that a request reads only its tenant's rows and
-- every tenant's statements are the same statements: PostgreSQL plans and
-- caches them once, whatever the number of tenants (see BENCHMARKS.md,
-- scenario 7). The indexes that serve the sweeper alone (expiry, age)
-- start with the time they look for, across tenants.
--
-- Records are kept as FOLIO keeps them, JSON documents (jsonb), with the
-- fields that rules and queries need exposed as generated columns, so that
-- every uniqueness rule and every reference is a database constraint.
-- Constraint names are part of the contract with the code: errors are
-- reported by constraint name, never by message text. A reference to
-- another record names it with the tenant, so no record ever refers to
-- another tenant's.

-- The tenants enabled for this module (POST /_/tenant). Tables of durable
-- records refer to it, so that no such record is written for a tenant
-- that is not enabled, or has been purged.
CREATE TABLE tenant (
    id         text PRIMARY KEY,
    enabled_at timestamptz NOT NULL DEFAULT now(),
    module_to  text
);

-- Jobs of the tenant interface, so that GET /_/tenant/{id} answers from any
-- instance of the service.
CREATE TABLE tenant_job (
    tenant_id         text NOT NULL,
    id                uuid NOT NULL,
    tenant_attributes jsonb NOT NULL,
    complete          boolean NOT NULL,
    error             text,
    messages          jsonb NOT NULL DEFAULT '[]',
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT tenant_job_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT tenant_job_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

-- One row per patron whose check-outs are serialised right now. The unique
-- (tenant_id, user_id) is the lock: two check-outs cannot both hold a row
-- for one patron. A row whose expires_at has passed is the same as no row;
-- the next acquirer takes it over in the same statement that would have
-- inserted it, and the sweeper deletes the rest so the table stays small.
-- Lock rows do not refer to the tenant table: every acquisition would lock
-- the tenant's one row for key share. A lock of a purged tenant expires.
-- holder: who holds the lock, as the acquiring check-out told it
-- (instance, request id, item barcode, service point) and the user it
-- acted for. previous: what a takeover replaced, set by the acquisition
-- that takes over an expired lock, in the same statement.
CREATE TABLE check_out_lock (
    tenant_id     text NOT NULL,
    id            uuid NOT NULL DEFAULT gen_random_uuid(),
    user_id       uuid NOT NULL,
    creation_date timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    ttl_ms        integer NOT NULL CHECK (ttl_ms > 0),
    holder        jsonb,
    previous      jsonb,
    CONSTRAINT check_out_lock_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT check_out_lock_user_id_key UNIQUE (tenant_id, user_id),
    CONSTRAINT check_out_lock_expiry_check CHECK (expires_at > creation_date)
);

-- The sweeper looks for expired rows of every tenant by expiry.
CREATE INDEX check_out_lock_expires_at_idx ON check_out_lock (expires_at);

-- Patrons someone is waiting to lock, and until when. A release announces
-- itself (NOTIFY) only when its patron has a row here: PostgreSQL
-- serialises the commits of notifying transactions, so an uncontended
-- release, the common case, must not notify. A waiter registers before it
-- looks at the lock for the last time, so a release either sees the row or
-- happened before that look. Rows only ever extend their expiry; expired
-- ones mean nothing and are swept.
CREATE TABLE check_out_lock_waiter (
    tenant_id  text NOT NULL,
    user_id    uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT check_out_lock_waiter_pkey PRIMARY KEY (tenant_id, user_id)
);

CREATE INDEX check_out_lock_waiter_expires_at_idx ON check_out_lock_waiter (expires_at);

-- The events that explain a wait or a refusal: a lock that expired while
-- held, a takeover, a release by someone other than the holder, a waiter
-- that gave up. Written only on those paths, never by an uncontended
-- acquire and release; trimmed by the sweeper to a retention period and a
-- maximum number of rows per tenant.
CREATE TABLE check_out_lock_event (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   text NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    type        text NOT NULL,
    user_id     uuid NOT NULL,
    lock_id     uuid,
    holder      jsonb,
    by_whom     jsonb,
    waited_ms   integer,
    CONSTRAINT check_out_lock_event_type_check
        CHECK (type IN ('expired', 'taken_over', 'released_by_other', 'waiter_gave_up'))
);

CREATE INDEX check_out_lock_event_user_idx ON check_out_lock_event (tenant_id, user_id, occurred_at);
CREATE INDEX check_out_lock_event_tenant_time_idx ON check_out_lock_event (tenant_id, occurred_at);
-- The per-tenant cap walks a tenant's newest events.
CREATE INDEX check_out_lock_event_tenant_id_idx ON check_out_lock_event (tenant_id, id);
-- The retention deletes old events of every tenant.
CREATE INDEX check_out_lock_event_time_idx ON check_out_lock_event (occurred_at);

CREATE TABLE patron_group (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'group') STORED NOT NULL,
    CONSTRAINT patron_group_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT patron_group_name_key UNIQUE (tenant_id, name),
    CONSTRAINT patron_group_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE material_type (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT material_type_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT material_type_name_key UNIQUE (tenant_id, name),
    CONSTRAINT material_type_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE loan_type (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT loan_type_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT loan_type_name_key UNIQUE (tenant_id, name),
    CONSTRAINT loan_type_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE patron (
    tenant_id       text NOT NULL,
    id              uuid NOT NULL,
    jsonb           jsonb NOT NULL,
    barcode         text GENERATED ALWAYS AS (jsonb ->> 'barcode') STORED,
    patron_group_id uuid GENERATED ALWAYS AS ((jsonb ->> 'patronGroup')::uuid) STORED NOT NULL,
    CONSTRAINT patron_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT patron_barcode_key UNIQUE (tenant_id, barcode),
    CONSTRAINT patron_patron_group_fkey FOREIGN KEY (tenant_id, patron_group_id) REFERENCES patron_group (tenant_id, id)
);

CREATE TABLE item (
    tenant_id              text NOT NULL,
    id                     uuid NOT NULL,
    jsonb                  jsonb NOT NULL,
    barcode                text GENERATED ALWAYS AS (jsonb ->> 'barcode') STORED,
    status_name            text GENERATED ALWAYS AS (jsonb -> 'status' ->> 'name') STORED NOT NULL,
    material_type_id       uuid GENERATED ALWAYS AS ((jsonb ->> 'materialTypeId')::uuid) STORED NOT NULL,
    permanent_loan_type_id uuid GENERATED ALWAYS AS ((jsonb ->> 'permanentLoanTypeId')::uuid) STORED NOT NULL,
    temporary_loan_type_id uuid GENERATED ALWAYS AS ((jsonb ->> 'temporaryLoanTypeId')::uuid) STORED,
    -- Optimistic locking: a write must name the version it read.
    version                integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED NOT NULL,
    CONSTRAINT item_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT item_barcode_key UNIQUE (tenant_id, barcode),
    CONSTRAINT item_material_type_fkey FOREIGN KEY (tenant_id, material_type_id) REFERENCES material_type (tenant_id, id),
    CONSTRAINT item_permanent_loan_type_fkey FOREIGN KEY (tenant_id, permanent_loan_type_id) REFERENCES loan_type (tenant_id, id),
    CONSTRAINT item_temporary_loan_type_fkey FOREIGN KEY (tenant_id, temporary_loan_type_id) REFERENCES loan_type (tenant_id, id)
);

CREATE TABLE loan_policy (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT loan_policy_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT loan_policy_name_key UNIQUE (tenant_id, name),
    CONSTRAINT loan_policy_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE loan (
    tenant_id      text NOT NULL,
    id             uuid NOT NULL,
    jsonb          jsonb NOT NULL,
    user_id        uuid GENERATED ALWAYS AS ((jsonb ->> 'userId')::uuid) STORED NOT NULL,
    item_id        uuid GENERATED ALWAYS AS ((jsonb ->> 'itemId')::uuid) STORED NOT NULL,
    status_name    text GENERATED ALWAYS AS (jsonb -> 'status' ->> 'name') STORED NOT NULL,
    loan_policy_id uuid GENERATED ALWAYS AS ((jsonb ->> 'loanPolicyId')::uuid) STORED,
    CONSTRAINT loan_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT loan_user_fkey FOREIGN KEY (tenant_id, user_id) REFERENCES patron (tenant_id, id),
    CONSTRAINT loan_item_fkey FOREIGN KEY (tenant_id, item_id) REFERENCES item (tenant_id, id),
    CONSTRAINT loan_loan_policy_fkey FOREIGN KEY (tenant_id, loan_policy_id) REFERENCES loan_policy (tenant_id, id)
);

-- One open loan per item, whoever races to create it.
CREATE UNIQUE INDEX loan_one_open_loan_per_item ON loan (tenant_id, item_id) WHERE status_name = 'Open';
-- The item-limit count reads a patron's open loans.
CREATE INDEX loan_open_by_user_idx ON loan (tenant_id, user_id) WHERE status_name = 'Open';
CREATE INDEX loan_user_id_idx ON loan (tenant_id, user_id);
CREATE INDEX loan_item_id_idx ON loan (tenant_id, item_id);

-- Circulation rules in structured form: a fallback policy and ordered rules,
-- each naming any of patron group, material type and loan type. Foreign keys
-- keep a rule from pointing at a record that does not exist, and keep such a
-- record from being deleted while a rule names it.
CREATE TABLE circulation_rules (
    tenant_id               text NOT NULL,
    fallback_loan_policy_id uuid NOT NULL,
    CONSTRAINT circulation_rules_pkey PRIMARY KEY (tenant_id),
    CONSTRAINT circulation_rules_fallback_fkey FOREIGN KEY (tenant_id, fallback_loan_policy_id) REFERENCES loan_policy (tenant_id, id)
);

CREATE TABLE circulation_rule (
    tenant_id        text NOT NULL,
    position         integer NOT NULL CHECK (position >= 0),
    patron_group_id  uuid,
    material_type_id uuid,
    loan_type_id     uuid,
    loan_policy_id   uuid NOT NULL,
    CONSTRAINT circulation_rule_pkey PRIMARY KEY (tenant_id, position),
    CONSTRAINT circulation_rule_patron_group_fkey FOREIGN KEY (tenant_id, patron_group_id) REFERENCES patron_group (tenant_id, id),
    CONSTRAINT circulation_rule_material_type_fkey FOREIGN KEY (tenant_id, material_type_id) REFERENCES material_type (tenant_id, id),
    CONSTRAINT circulation_rule_loan_type_fkey FOREIGN KEY (tenant_id, loan_type_id) REFERENCES loan_type (tenant_id, id),
    CONSTRAINT circulation_rule_loan_policy_fkey FOREIGN KEY (tenant_id, loan_policy_id) REFERENCES loan_policy (tenant_id, id)
);

-- Settings, a subset of FOLIO mod-settings: one value per (scope, key).
-- Entries have optimistic locking, as items have it: every write
-- increments "_version", and a write that names the version it read fails
-- if another write came first. A write that names no version still
-- replaces the entry, as FOLIO's clients expect.
CREATE TABLE setting (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    scope     text GENERATED ALWAYS AS (jsonb ->> 'scope') STORED NOT NULL,
    key       text GENERATED ALWAYS AS (jsonb ->> 'key') STORED NOT NULL,
    version   integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED,
    CONSTRAINT setting_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT setting_scope_key_key UNIQUE (tenant_id, scope, key),
    CONSTRAINT setting_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

-- Every change to a settings entry, with who made it: the user and the
-- module acting for them, written in the change's own transaction, so a
-- change is never without its record.
CREATE TABLE setting_change (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id         text NOT NULL,
    changed_at        timestamptz NOT NULL DEFAULT now(),
    setting_id        uuid NOT NULL,
    scope             text NOT NULL,
    key               text NOT NULL,
    operation         text NOT NULL,
    value             jsonb,
    changed_by        text,
    changed_by_module text,
    CONSTRAINT setting_change_operation_check CHECK (operation IN ('create', 'update', 'delete')),
    CONSTRAINT setting_change_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE INDEX setting_change_setting_idx ON setting_change (tenant_id, setting_id, changed_at);
