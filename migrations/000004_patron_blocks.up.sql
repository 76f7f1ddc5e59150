-- Automated patron blocks, as mod-patron-blocks keeps them: the conditions
-- (a fixed set, FOLIO's ids, each saying which actions it blocks and with
-- which message) and, per patron group, the limit of each condition. A
-- tenant is given the conditions when it is enabled; a limit names its
-- patron group and condition with the tenant.
CREATE TABLE patron_block_condition (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    CONSTRAINT patron_block_condition_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT patron_block_condition_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE patron_block_limit (
    tenant_id       text NOT NULL,
    id              uuid NOT NULL,
    jsonb           jsonb NOT NULL,
    patron_group_id uuid GENERATED ALWAYS AS ((jsonb ->> 'patronGroupId')::uuid) STORED NOT NULL,
    condition_id    uuid GENERATED ALWAYS AS ((jsonb ->> 'conditionId')::uuid) STORED NOT NULL,
    value           numeric GENERATED ALWAYS AS ((jsonb ->> 'value')::numeric) STORED NOT NULL,
    CONSTRAINT patron_block_limit_pkey PRIMARY KEY (tenant_id, id),
    -- One limit per condition and patron group.
    CONSTRAINT patron_block_limit_group_condition_key UNIQUE (tenant_id, patron_group_id, condition_id),
    CONSTRAINT patron_block_limit_patron_group_fkey FOREIGN KEY (tenant_id, patron_group_id) REFERENCES patron_group (tenant_id, id),
    CONSTRAINT patron_block_limit_condition_fkey FOREIGN KEY (tenant_id, condition_id) REFERENCES patron_block_condition (tenant_id, id),
    CONSTRAINT patron_block_limit_value_check CHECK (value >= 0)
);
