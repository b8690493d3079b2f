-- +goose Up
-- Direct-chat access under dm_policy "pairing": an unknown sender gets a
-- one-time code; an operator approves it and the sender is allowed from
-- then on.
CREATE TABLE pairing_requests (
    code         TEXT PRIMARY KEY,
    adapter      TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    chat_id      TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    approved_at  BIGINT
);
CREATE INDEX pairing_requests_pending ON pairing_requests (adapter, user_id) WHERE approved_at IS NULL;

CREATE TABLE allowed_users (
    adapter     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    approved_at BIGINT NOT NULL,
    code        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (adapter, user_id)
);
