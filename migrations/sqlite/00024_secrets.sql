-- +goose Up
-- The secrets store: every value is sealed with AES-256-GCM under a key
-- kept outside the database (PARLEY_SECRET_KEY or secrets.key_file);
-- key_id names that key (the first 8 bytes of its SHA-256, in hex), so a
-- wrong key is told apart from a damaged value.
CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    value       BLOB NOT NULL,
    key_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- A person's own tokens for a provider (/connect github), injected into
-- their MCP calls; the user is the surface and its user id.
CREATE TABLE user_connections (
    surface     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    provider    TEXT NOT NULL,
    value       BLOB NOT NULL,
    key_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (surface, user_id, provider)
);

-- Other sealed values, by kind and id: a WhatsApp device's private keys.
CREATE TABLE sealed_blobs (
    kind        TEXT NOT NULL,
    id          TEXT NOT NULL,
    value       BLOB NOT NULL,
    key_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
