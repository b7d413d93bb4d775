-- 0004: the people the AS knows, local or from an upstream OpenID provider.
-- subject is the sub the AS issues, ordered bytewise (COLLATE "C") so the
-- primary key serves paging. claims is a JSON object of arrays of strings;
-- upstream_refresh is sealed by the AS. Zero times are NULL.

CREATE TABLE users (
    subject          text COLLATE "C" PRIMARY KEY,
    upstream         text NOT NULL DEFAULT '',
    upstream_subject text NOT NULL DEFAULT '',
    name             text NOT NULL DEFAULT '',
    email            text NOT NULL DEFAULT '',
    groups           text[] NOT NULL DEFAULT '{}',
    claims           jsonb NOT NULL DEFAULT '{}',
    first_seen       timestamptz,
    last_seen        timestamptz,
    disabled         boolean NOT NULL DEFAULT false,
    upstream_refresh bytea,
    checked_at       timestamptz
);
