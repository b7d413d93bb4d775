-- 0004: the people the AS knows, local or from an upstream OpenID provider.
-- subject is the sub the AS issues. groups and claims are JSON (an array of
-- strings; an object of arrays of strings); upstream_refresh is sealed by the
-- AS. Zero times are NULL.

CREATE TABLE users (
    subject          TEXT PRIMARY KEY,
    upstream         TEXT NOT NULL DEFAULT '',
    upstream_subject TEXT NOT NULL DEFAULT '',
    name             TEXT NOT NULL DEFAULT '',
    email            TEXT NOT NULL DEFAULT '',
    groups           TEXT NOT NULL DEFAULT '[]',
    claims           TEXT NOT NULL DEFAULT '{}',
    first_seen       INTEGER,
    last_seen        INTEGER,
    disabled         INTEGER NOT NULL DEFAULT 0,
    upstream_refresh BLOB,
    checked_at       INTEGER
) WITHOUT ROWID;
