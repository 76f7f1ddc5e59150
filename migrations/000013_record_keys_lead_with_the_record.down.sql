ALTER TABLE manual_block DROP CONSTRAINT manual_block_pkey, ADD CONSTRAINT manual_block_pkey PRIMARY KEY (tenant_id, id);
CREATE INDEX request_item_id_idx ON request (item_id, tenant_id);
ALTER TABLE request DROP CONSTRAINT request_queue_position_key,
    ADD CONSTRAINT request_queue_position_key UNIQUE (tenant_id, item_id, position) DEFERRABLE INITIALLY IMMEDIATE;
ALTER TABLE request DROP CONSTRAINT request_pkey, ADD CONSTRAINT request_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE loan DROP CONSTRAINT loan_pkey, ADD CONSTRAINT loan_pkey PRIMARY KEY (tenant_id, id);
