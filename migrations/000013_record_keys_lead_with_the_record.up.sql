-- The tables that grow with a library's use (loans, requests, manual
-- blocks) have no index led by the tenant. Their rows are found by the
-- record they belong to (an item's open loan, a patron's open loans, an
-- item's queue, a patron's blocks), through indexes led by that record's id
-- and ending with the tenant (migration 2). An index led by the tenant
-- would also match a condition on the tenant alone, and a plan made while
-- the statistics said the tenant was small (a fresh install, statistics
-- taken before the tenant grew, autovacuum off or behind) can pick it and
-- read every row of the tenant to find one record's: a prepared
-- statement's generic plan keeps that choice for as long as its
-- connection lives. Without such an index the only other way is a scan of
-- a whole table or index, which the planner prices by its real size.
--
-- The primary keys are therefore led by the record's id, and an item's
-- queue positions by the item: the same uniqueness. A tenant's records
-- listed whole (a collection read without a filter on a record) are read by
-- scanning the table; those reads count every match anyway.
ALTER TABLE loan DROP CONSTRAINT loan_pkey, ADD CONSTRAINT loan_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE request DROP CONSTRAINT request_pkey, ADD CONSTRAINT request_pkey PRIMARY KEY (id, tenant_id);
ALTER TABLE request DROP CONSTRAINT request_queue_position_key,
    ADD CONSTRAINT request_queue_position_key UNIQUE (item_id, tenant_id, position) DEFERRABLE INITIALLY IMMEDIATE;
-- The queue's key now finds an item's requests: the index that did is one
-- more to write with each request.
DROP INDEX request_item_id_idx;
ALTER TABLE manual_block DROP CONSTRAINT manual_block_pkey, ADD CONSTRAINT manual_block_pkey PRIMARY KEY (id, tenant_id);
