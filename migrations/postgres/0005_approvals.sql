-- 0005: people's approvals of single tool calls held by a resource server.
-- An approval is bound to (subject, client_id, resource, tool, args_digest);
-- arguments are the canonical (RFC 8785) JSON bytes the person was shown.
-- status is pending, approved, denied or used. At most one approval of a
-- binding is pending at a time. id sorts bytewise (COLLATE "C") so the
-- primary key serves paging. Zero times are NULL.

CREATE TABLE approvals (
    id          text COLLATE "C" PRIMARY KEY,
    subject     text NOT NULL,
    client_id   text NOT NULL,
    resource    text NOT NULL,
    tool        text NOT NULL,
    args_digest text NOT NULL,
    arguments   bytea NOT NULL,
    status      text NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    decided_at  timestamptz,
    used_at     timestamptz
);
CREATE UNIQUE INDEX approvals_pending_idx ON approvals (subject, client_id, resource, tool, args_digest)
    WHERE status = 'pending';
CREATE INDEX approvals_binding_idx ON approvals (subject, client_id, resource, tool, args_digest, created_at);
CREATE INDEX approvals_subject_idx ON approvals (subject, id);
CREATE INDEX approvals_expires_idx ON approvals (expires_at);
