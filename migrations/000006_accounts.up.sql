-- People who sign in (FOLIO's login): an account per person and tenant,
-- named by a username unique in the tenant (whatever its case), holding
-- the roles that make its tokens' permissions. The password is kept apart,
-- as an argon2id hash only. Refresh tokens are kept by their hash, so a
-- logout or a rotation revokes them. Failed sign-ins are counted per
-- account and per client address, so repeated failures lock either for a
-- while, across every instance.
CREATE TABLE account (
    tenant_id text NOT NULL,
    id        uuid NOT NULL,
    jsonb     jsonb NOT NULL,
    username  text GENERATED ALWAYS AS (lower(jsonb ->> 'username')) STORED NOT NULL,
    CONSTRAINT account_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT account_username_key UNIQUE (tenant_id, username),
    CONSTRAINT account_tenant_fkey FOREIGN KEY (tenant_id) REFERENCES tenant (id)
);

CREATE TABLE account_credential (
    tenant_id  text NOT NULL,
    account_id uuid NOT NULL,
    hash       text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT account_credential_pkey PRIMARY KEY (tenant_id, account_id),
    CONSTRAINT account_credential_account_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES account (tenant_id, id) ON DELETE CASCADE
);

CREATE TABLE refresh_token (
    tenant_id  text NOT NULL,
    hash       bytea NOT NULL,
    account_id uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    CONSTRAINT refresh_token_pkey PRIMARY KEY (tenant_id, hash),
    CONSTRAINT refresh_token_account_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES account (tenant_id, id) ON DELETE CASCADE
);

CREATE INDEX refresh_token_expires_at_idx ON refresh_token (expires_at);

CREATE TABLE login_failure (
    tenant_id    text NOT NULL,
    key          text NOT NULL,
    failures     integer NOT NULL,
    first_at     timestamptz NOT NULL,
    locked_until timestamptz,
    CONSTRAINT login_failure_pkey PRIMARY KEY (tenant_id, key)
);
