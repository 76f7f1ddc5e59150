DROP TABLE patron_block_limit, patron_block_condition;
