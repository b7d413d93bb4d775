-- 0001: the records of storage/storage.go.
-- Secrets are keyed hashes and sealed bytes (bytea); tokens are keyed by
-- signature. Timestamps are timestamptz, NULL for Go's zero time.

CREATE TABLE clients (
    id                         text PRIMARY KEY,
    secret_hash                bytea,
    secret_expires_at          timestamptz,
    public                     boolean NOT NULL DEFAULT false,
    name                       text NOT NULL DEFAULT '',
    redirect_uris              text[] NOT NULL DEFAULT '{}',
    grant_types                text[] NOT NULL DEFAULT '{}',
    response_types             text[] NOT NULL DEFAULT '{}',
    scopes                     text[] NOT NULL DEFAULT '{}',
    resources                  text[] NOT NULL DEFAULT '{}',
    token_endpoint_auth_method text NOT NULL DEFAULT '',
    jwks                       bytea,
    jwks_uri                   text NOT NULL DEFAULT '',
    application_type           text NOT NULL DEFAULT '',
    metadata                   bytea,
    registration_token_hash    bytea,
    source                     text NOT NULL DEFAULT '',
    created_at                 timestamptz NOT NULL,
    updated_at                 timestamptz NOT NULL,
    last_used_at               timestamptz
);
-- ReapClients: dynamic clients by age and use.
CREATE INDEX clients_reap_idx ON clients (source, created_at) WHERE source IN ('dcr', 'cimd');

CREATE TABLE tokens (
    kind       text NOT NULL,
    signature  text NOT NULL,
    request_id text NOT NULL,
    client_id  text NOT NULL DEFAULT '',
    subject    text NOT NULL DEFAULT '',
    active     boolean NOT NULL,
    created_at timestamptz,
    expires_at timestamptz,
    rotated_at timestamptz,
    data       bytea,
    PRIMARY KEY (kind, signature)
);
-- RevokeTokens: a refresh-token family by request id.
CREATE INDEX tokens_request_idx ON tokens (kind, request_id);
-- DeleteExpiredTokens.
CREATE INDEX tokens_expires_idx ON tokens (expires_at);

CREATE TABLE consents (
    subject    text NOT NULL,
    client_id  text NOT NULL,
    resource   text NOT NULL,
    scopes     text[] NOT NULL DEFAULT '{}',
    granted_at timestamptz,
    expires_at timestamptz,
    PRIMARY KEY (subject, client_id, resource)
);
CREATE INDEX consents_expires_idx ON consents (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE signing_keys (
    id             text PRIMARY KEY,
    algorithm      text NOT NULL,
    public_jwk     bytea,
    private_sealed bytea,
    created_at     timestamptz,
    retired_at     timestamptz
);

-- id is bytea: a jti is any JSON string, "\u0000" included.
CREATE TABLE jtis (
    id         bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX jtis_expires_idx ON jtis (expires_at);
