-- 0007: the audit events the AS keeps for the console, and hourly counts
-- of what happened (tokens issued, refusals, logins).
--
-- Events are listed newest (highest id) first, filtered by person, client
-- or event, and paged by id: each filter, and a person's or a client's
-- events of one kind, has an index ending in id, so a page is a backward
-- scan of one index; an event prefix is one such scan per event it names.
-- AUTOINCREMENT keeps ids increasing even after the newest events are
-- deleted. detail is the JSON object of the audit line's other
-- attributes, kept as written.

CREATE TABLE audit_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    time          INTEGER NOT NULL,
    event         TEXT NOT NULL,
    subject       TEXT NOT NULL DEFAULT '',
    client_id     TEXT NOT NULL DEFAULT '',
    admin_subject TEXT NOT NULL DEFAULT '',
    detail        BLOB
);
CREATE INDEX audit_events_subject_idx ON audit_events (subject, id);
CREATE INDEX audit_events_client_idx ON audit_events (client_id, id);
CREATE INDEX audit_events_event_idx ON audit_events (event, id);
CREATE INDEX audit_events_subject_event_idx ON audit_events (subject, event, id);
CREATE INDEX audit_events_client_event_idx ON audit_events (client_id, event, id);
CREATE INDEX audit_events_time_idx ON audit_events (time);

-- hour is the start of the hour (UTC) the count belongs to, in Unix
-- nanoseconds.
CREATE TABLE hourly_stats (
    hour  INTEGER NOT NULL,
    name  TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, name)
) WITHOUT ROWID;
