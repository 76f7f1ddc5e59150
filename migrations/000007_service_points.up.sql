-- Service points (FOLIO's /service-points): where a check-out happens, by
-- name, for the pages and the lock history to show instead of an id.
CREATE TABLE service_point (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    name      text GENERATED ALWAYS AS (jsonb ->> 'name') STORED NOT NULL,
    CONSTRAINT service_point_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT service_point_name_key UNIQUE (tenant_id, name),
    CONSTRAINT service_point_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);
