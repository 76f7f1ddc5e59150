-- Jobs of the tenant interface (POST /_/tenant), so that GET /_/tenant/{id}
-- answers from any instance of the service.
CREATE TABLE tenant_job (
    id                uuid PRIMARY KEY,
    tenant_attributes jsonb NOT NULL,
    complete          boolean NOT NULL,
    error             text,
    messages          jsonb NOT NULL DEFAULT '[]',
    created_at        timestamptz NOT NULL DEFAULT now()
);
