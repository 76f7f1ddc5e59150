DROP TABLE setting_change, setting, circulation_rule, circulation_rules, loan, loan_policy, item, patron,
    loan_type, material_type, patron_group, check_out_lock_event, check_out_lock_waiter, check_out_lock,
    tenant_job, tenant;
