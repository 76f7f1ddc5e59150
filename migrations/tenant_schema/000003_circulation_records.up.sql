-- The records a check-out reads and writes. Each record is kept as FOLIO
-- keeps it, a JSON document (jsonb), with the fields that rules and queries
-- need exposed as generated columns, so that every uniqueness rule and every
-- reference is a database constraint. Constraint names are part of the
-- contract with the code: errors are reported by constraint name, never by
-- message text.

CREATE TABLE patron_group (
    id    uuid PRIMARY KEY,
    jsonb jsonb NOT NULL,
    name  text GENERATED ALWAYS AS (jsonb ->> 'group') STORED NOT NULL,
    CONSTRAINT patron_group_name_key UNIQUE (name)
);

CREATE TABLE material_type (
    id    uuid PRIMARY KEY,
    jsonb jsonb NOT NULL,
    name  text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT material_type_name_key UNIQUE (name)
);

CREATE TABLE loan_type (
    id    uuid PRIMARY KEY,
    jsonb jsonb NOT NULL,
    name  text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT loan_type_name_key UNIQUE (name)
);

CREATE TABLE patron (
    id              uuid PRIMARY KEY,
    jsonb           jsonb NOT NULL,
    barcode         text GENERATED ALWAYS AS (jsonb ->> 'barcode') STORED,
    patron_group_id uuid GENERATED ALWAYS AS ((jsonb ->> 'patronGroup')::uuid) STORED NOT NULL,
    CONSTRAINT patron_barcode_key UNIQUE (barcode),
    CONSTRAINT patron_patron_group_fkey FOREIGN KEY (patron_group_id) REFERENCES patron_group (id)
);

CREATE TABLE item (
    id                     uuid PRIMARY KEY,
    jsonb                  jsonb NOT NULL,
    barcode                text GENERATED ALWAYS AS (jsonb ->> 'barcode') STORED,
    status_name            text GENERATED ALWAYS AS (jsonb -> 'status' ->> 'name') STORED NOT NULL,
    material_type_id       uuid GENERATED ALWAYS AS ((jsonb ->> 'materialTypeId')::uuid) STORED NOT NULL,
    permanent_loan_type_id uuid GENERATED ALWAYS AS ((jsonb ->> 'permanentLoanTypeId')::uuid) STORED NOT NULL,
    temporary_loan_type_id uuid GENERATED ALWAYS AS ((jsonb ->> 'temporaryLoanTypeId')::uuid) STORED,
    -- Optimistic locking: a write must name the version it read.
    version                integer GENERATED ALWAYS AS ((jsonb ->> '_version')::integer) STORED NOT NULL,
    CONSTRAINT item_barcode_key UNIQUE (barcode),
    CONSTRAINT item_material_type_fkey FOREIGN KEY (material_type_id) REFERENCES material_type (id),
    CONSTRAINT item_permanent_loan_type_fkey FOREIGN KEY (permanent_loan_type_id) REFERENCES loan_type (id),
    CONSTRAINT item_temporary_loan_type_fkey FOREIGN KEY (temporary_loan_type_id) REFERENCES loan_type (id)
);

CREATE TABLE loan_policy (
    id    uuid PRIMARY KEY,
    jsonb jsonb NOT NULL,
    name  text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT loan_policy_name_key UNIQUE (name)
);

CREATE TABLE loan (
    id             uuid PRIMARY KEY,
    jsonb          jsonb NOT NULL,
    user_id        uuid GENERATED ALWAYS AS ((jsonb ->> 'userId')::uuid) STORED NOT NULL,
    item_id        uuid GENERATED ALWAYS AS ((jsonb ->> 'itemId')::uuid) STORED NOT NULL,
    status_name    text GENERATED ALWAYS AS (jsonb -> 'status' ->> 'name') STORED NOT NULL,
    loan_policy_id uuid GENERATED ALWAYS AS ((jsonb ->> 'loanPolicyId')::uuid) STORED,
    CONSTRAINT loan_user_fkey FOREIGN KEY (user_id) REFERENCES patron (id),
    CONSTRAINT loan_item_fkey FOREIGN KEY (item_id) REFERENCES item (id),
    CONSTRAINT loan_loan_policy_fkey FOREIGN KEY (loan_policy_id) REFERENCES loan_policy (id)
);

-- One open loan per item, whoever races to create it.
CREATE UNIQUE INDEX loan_one_open_loan_per_item ON loan (item_id) WHERE status_name = 'Open';
-- The item-limit count reads a patron's open loans.
CREATE INDEX loan_open_by_user_idx ON loan (user_id) WHERE status_name = 'Open';
CREATE INDEX loan_user_id_idx ON loan (user_id);
CREATE INDEX loan_item_id_idx ON loan (item_id);

-- Circulation rules in structured form: a fallback policy and ordered rules,
-- each naming any of patron group, material type and loan type. Foreign keys
-- keep a rule from pointing at a record that does not exist, and keep such a
-- record from being deleted while a rule names it.
CREATE TABLE circulation_rules (
    id                      smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    fallback_loan_policy_id uuid NOT NULL,
    CONSTRAINT circulation_rules_fallback_fkey FOREIGN KEY (fallback_loan_policy_id) REFERENCES loan_policy (id)
);

CREATE TABLE circulation_rule (
    position         integer PRIMARY KEY CHECK (position >= 0),
    patron_group_id  uuid,
    material_type_id uuid,
    loan_type_id     uuid,
    loan_policy_id   uuid NOT NULL,
    CONSTRAINT circulation_rule_patron_group_fkey FOREIGN KEY (patron_group_id) REFERENCES patron_group (id),
    CONSTRAINT circulation_rule_material_type_fkey FOREIGN KEY (material_type_id) REFERENCES material_type (id),
    CONSTRAINT circulation_rule_loan_type_fkey FOREIGN KEY (loan_type_id) REFERENCES loan_type (id),
    CONSTRAINT circulation_rule_loan_policy_fkey FOREIGN KEY (loan_policy_id) REFERENCES loan_policy (id)
);

-- Settings, a subset of FOLIO mod-settings: one value per (scope, key).
CREATE TABLE setting (
    id    uuid PRIMARY KEY,
    jsonb jsonb NOT NULL,
    scope text GENERATED ALWAYS AS (jsonb ->> 'scope') STORED NOT NULL,
    key   text GENERATED ALWAYS AS (jsonb ->> 'key') STORED NOT NULL,
    CONSTRAINT setting_scope_key_key UNIQUE (scope, key)
);
