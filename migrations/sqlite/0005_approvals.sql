-- 0005: people's approvals of single tool calls held by a resource server.
-- An approval is bound to (subject, client_id, resource, tool, args_digest);
-- arguments are the canonical (RFC 8785) JSON bytes the person was shown.
-- status is pending, approved, denied or used. At most one approval of a
-- binding is pending at a time. Times are Unix nanoseconds; zero times are
-- NULL.

CREATE TABLE approvals (
    id          TEXT PRIMARY KEY,
    subject     TEXT NOT NULL,
    client_id   TEXT NOT NULL,
    resource    TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    arguments   BLOB NOT NULL,
    status      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    decided_at  INTEGER,
    used_at     INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX approvals_pending_idx ON approvals (subject, client_id, resource, tool, args_digest)
    WHERE status = 'pending';
CREATE INDEX approvals_binding_idx ON approvals (subject, client_id, resource, tool, args_digest, created_at);
CREATE INDEX approvals_subject_idx ON approvals (subject, id);
CREATE INDEX approvals_expires_idx ON approvals (expires_at);
