-- 0003: grants as a whole and the Token Status List (draft-ietf-oauth-status-list).
-- Every token of a grant carries the grant's status index (0: none); the
-- counter hands out indices; token_status records the revoked ones until
-- their tokens expire. The index serves revocation by client and person.

ALTER TABLE tokens ADD COLUMN status_idx bigint NOT NULL DEFAULT 0;
CREATE INDEX tokens_client_subject_idx ON tokens (client_id, subject);

CREATE TABLE status_counter (
    id   integer PRIMARY KEY CHECK (id = 1),
    last bigint NOT NULL
);
INSERT INTO status_counter (id, last) VALUES (1, 0);

CREATE TABLE token_status (
    idx        bigint PRIMARY KEY,
    status     smallint NOT NULL,
    expires_at timestamptz
);
CREATE INDEX token_status_expires_idx ON token_status (expires_at);
