-- 0002: server-side browser sessions, shared throttle and rate-limit
-- counters, and the redirect URIs a consent was given for.

-- Consents given before this version have no redirect set, so they match no
-- client and the person is asked again.
ALTER TABLE consents ADD COLUMN redirect_uris text[] NOT NULL DEFAULT '{}';

CREATE TABLE counters (
    key        text PRIMARY KEY,
    count      integer NOT NULL DEFAULT 0,
    until      timestamptz,
    expires_at timestamptz
);
CREATE INDEX counters_expires_idx ON counters (expires_at);

-- id is a keyed hash of the cookie's session id.
CREATE TABLE sessions (
    id              text PRIMARY KEY,
    subject         text NOT NULL,
    created_at      timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    idle_expires_at timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    user_agent      text NOT NULL DEFAULT '',
    address         text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_subject_idx ON sessions (subject);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);
CREATE INDEX sessions_idle_expires_idx ON sessions (idle_expires_at);
