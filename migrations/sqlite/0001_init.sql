-- 0001: the records of storage/storage.go.
-- Lists are JSON arrays in text; secrets are keyed hashes and sealed bytes
-- (blob); timestamps are Unix nanoseconds (integer), NULL for Go's zero time.

CREATE TABLE clients (
    id                         TEXT PRIMARY KEY,
    secret_hash                BLOB,
    secret_expires_at          INTEGER,
    public                     INTEGER NOT NULL DEFAULT 0,
    name                       TEXT NOT NULL DEFAULT '',
    redirect_uris              TEXT NOT NULL DEFAULT '[]',
    grant_types                TEXT NOT NULL DEFAULT '[]',
    response_types             TEXT NOT NULL DEFAULT '[]',
    scopes                     TEXT NOT NULL DEFAULT '[]',
    resources                  TEXT NOT NULL DEFAULT '[]',
    token_endpoint_auth_method TEXT NOT NULL DEFAULT '',
    jwks                       BLOB,
    jwks_uri                   TEXT NOT NULL DEFAULT '',
    application_type           TEXT NOT NULL DEFAULT '',
    metadata                   BLOB,
    registration_token_hash    BLOB,
    source                     TEXT NOT NULL DEFAULT '',
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL,
    last_used_at               INTEGER
) WITHOUT ROWID;
CREATE INDEX clients_reap_idx ON clients (source, created_at);

CREATE TABLE tokens (
    kind       TEXT NOT NULL,
    signature  TEXT NOT NULL,
    request_id TEXT NOT NULL,
    client_id  TEXT NOT NULL DEFAULT '',
    subject    TEXT NOT NULL DEFAULT '',
    active     INTEGER NOT NULL,
    created_at INTEGER,
    expires_at INTEGER,
    rotated_at INTEGER,
    data       BLOB,
    PRIMARY KEY (kind, signature)
);
CREATE INDEX tokens_request_idx ON tokens (kind, request_id);
CREATE INDEX tokens_expires_idx ON tokens (expires_at);

CREATE TABLE consents (
    subject    TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    resource   TEXT NOT NULL,
    scopes     TEXT NOT NULL DEFAULT '[]',
    granted_at INTEGER,
    expires_at INTEGER,
    PRIMARY KEY (subject, client_id, resource)
);
CREATE INDEX consents_expires_idx ON consents (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE signing_keys (
    id             TEXT PRIMARY KEY,
    algorithm      TEXT NOT NULL,
    public_jwk     BLOB,
    private_sealed BLOB,
    created_at     INTEGER,
    retired_at     INTEGER
) WITHOUT ROWID;

CREATE TABLE jtis (
    id         TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
CREATE INDEX jtis_expires_idx ON jtis (expires_at);
