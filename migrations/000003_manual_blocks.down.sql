DROP TABLE manual_block;
