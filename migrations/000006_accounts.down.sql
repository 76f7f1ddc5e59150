DROP TABLE login_failure, refresh_token, account_credential, account;
