DROP TRIGGER tenant_has_requests ON request;
DROP FUNCTION tenant_has_requests();
DROP TRIGGER tenant_has_block_limits ON patron_block_limit;
DROP FUNCTION tenant_has_block_limits();
DROP TRIGGER tenant_has_manual_blocks ON manual_block;
DROP FUNCTION tenant_has_manual_blocks();
ALTER TABLE tenant DROP COLUMN has_requests, DROP COLUMN has_block_limits, DROP COLUMN has_manual_blocks;
