-- Requests (FOLIO's /request-storage/requests): a patron's hold, recall or
-- page of an item. An item's open requests ("Open - …") form its queue in
-- position order; the first decides who may check the item out, and a
-- check-out by its requester fills it in the check-out's own write. A
-- closed request has no position. Positions are unique in a queue, checked
-- at the end of each statement, so that one statement can close the first
-- request and move every other up.
CREATE TABLE request (
    tenant_id    text NOT NULL,
    id           uuid NOT NULL,
    jsonb        jsonb NOT NULL,
    item_id      uuid GENERATED ALWAYS AS ((jsonb ->> 'itemId')::uuid) STORED NOT NULL,
    requester_id uuid GENERATED ALWAYS AS ((jsonb ->> 'requesterId')::uuid) STORED NOT NULL,
    status       text GENERATED ALWAYS AS (jsonb ->> 'status') STORED NOT NULL,
    position     integer GENERATED ALWAYS AS ((jsonb ->> 'position')::integer) STORED,
    CONSTRAINT request_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT request_item_fkey FOREIGN KEY (tenant_id, item_id) REFERENCES item (tenant_id, id),
    CONSTRAINT request_requester_fkey FOREIGN KEY (tenant_id, requester_id) REFERENCES patron (tenant_id, id),
    CONSTRAINT request_queue_position_key UNIQUE (tenant_id, item_id, position) DEFERRABLE INITIALLY IMMEDIATE
);

-- An item's queue, led by the item (see migration 2).
CREATE INDEX request_item_id_idx ON request (item_id, tenant_id);
CREATE INDEX request_requester_id_idx ON request (requester_id, tenant_id);
