-- 0002: server-side browser sessions, shared throttle and rate-limit
-- counters, and the redirect URIs a consent was given for.

-- Consents given before this version have no redirect set, so they match no
-- client and the person is asked again.
ALTER TABLE consents ADD COLUMN redirect_uris TEXT NOT NULL DEFAULT '[]';

CREATE TABLE counters (
    key        TEXT PRIMARY KEY,
    count      INTEGER NOT NULL DEFAULT 0,
    until      INTEGER,
    expires_at INTEGER
) WITHOUT ROWID;
CREATE INDEX counters_expires_idx ON counters (expires_at);

-- id is a keyed hash of the cookie's session id.
CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    subject         TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    idle_expires_at INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    user_agent      TEXT NOT NULL DEFAULT '',
    address         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX sessions_subject_idx ON sessions (subject);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);
CREATE INDEX sessions_idle_expires_idx ON sessions (idle_expires_at);
