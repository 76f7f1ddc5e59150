-- Every change to a settings entry, with who made it: the user and the
-- module acting for them (circulation, for a librarian's change through
-- its settings page), written in the change's own transaction, so a change
-- is never without its record. The check-out lock's settings decide
-- whether the lock guards check-outs at all.
CREATE TABLE setting_change (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    changed_at        timestamptz NOT NULL DEFAULT now(),
    setting_id        uuid NOT NULL,
    scope             text NOT NULL,
    key               text NOT NULL,
    operation         text NOT NULL,
    value             jsonb,
    changed_by        text,
    changed_by_module text,
    CONSTRAINT setting_change_operation_check CHECK (operation IN ('create', 'update', 'delete'))
);

CREATE INDEX setting_change_setting_idx ON setting_change (setting_id, changed_at);
