-- The times a SIP2 door saw each self-check machine on line: signed in on
-- a connection and the library system answering. A machine is its
-- account and the location code it gave at login; a span is one
-- connection's time on line, from when the door first recorded it to when
-- it last did, and a new span begins after the door saw the library system
-- not answer. A check-out or check-in a machine marks as made offline (no
-- block) is taken as offline only for a time outside every span of that
-- machine: a door restarted, or another door, still knows the spans.
-- Spans past the oldest offline transaction a door takes are deleted as a
-- machine records new ones.
CREATE TABLE kiosk_presence (
    tenant_id text NOT NULL,
    id uuid NOT NULL,
    account_id uuid NOT NULL,
    location text NOT NULL,
    on_from timestamptz NOT NULL,
    on_to timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX kiosk_presence_machine ON kiosk_presence (tenant_id, account_id, location, on_to);
