-- Request policies (FOLIO's /request-policy-storage/request-policies):
-- which request types a patron may place on an item. The circulation
-- rules choose one as they choose the loan policy: the matching rule's
-- request policy, else the fallback; a tenant whose rules name none
-- allows every type, as before this migration.
CREATE TABLE request_policy (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT request_policy_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT request_policy_name_key UNIQUE (tenant_id, name),
    CONSTRAINT request_policy_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

ALTER TABLE circulation_rules
    ADD COLUMN fallback_request_policy_id uuid,
    ADD CONSTRAINT circulation_rules_fallback_request_policy_fkey
        FOREIGN KEY (tenant_id, fallback_request_policy_id) REFERENCES request_policy (tenant_id, id);

ALTER TABLE circulation_rule
    ADD COLUMN request_policy_id uuid,
    ADD CONSTRAINT circulation_rule_request_policy_fkey
        FOREIGN KEY (tenant_id, request_policy_id) REFERENCES request_policy (tenant_id, id);
