-- 0006: the accounts people connect at third-party services (connections[]):
-- one row per person and connection, holding the provider's access and
-- refresh tokens sealed by the AS. scopes are those the provider granted.
-- Zero times are NULL.

CREATE TABLE connections (
    subject         text COLLATE "C" NOT NULL,
    connection_id   text COLLATE "C" NOT NULL,
    access_token    bytea NOT NULL,
    refresh_token   bytea,
    token_type      text NOT NULL DEFAULT '',
    expires_at      timestamptz,
    scopes          text[] NOT NULL DEFAULT '{}',
    needs_reconnect boolean NOT NULL DEFAULT false,
    created_at      timestamptz,
    updated_at      timestamptz,
    PRIMARY KEY (subject, connection_id)
);
