-- 0006: the accounts people connect at third-party services (connections[]):
-- one row per person and connection, holding the provider's access and
-- refresh tokens sealed by the AS. scopes is a JSON array of the scopes the
-- provider granted. Zero times are NULL.

CREATE TABLE connections (
    subject         TEXT NOT NULL,
    connection_id   TEXT NOT NULL,
    access_token    BLOB NOT NULL,
    refresh_token   BLOB,
    token_type      TEXT NOT NULL DEFAULT '',
    expires_at      INTEGER,
    scopes          TEXT NOT NULL DEFAULT '[]',
    needs_reconnect INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER,
    updated_at      INTEGER,
    PRIMARY KEY (subject, connection_id)
) WITHOUT ROWID;
