DROP TRIGGER request_gate ON request;
DROP TRIGGER patron_block_limit_gate ON patron_block_limit;
DROP TRIGGER manual_block_gate ON manual_block;
DROP FUNCTION tenant_gate_open();
DROP TABLE tenant_gate;
