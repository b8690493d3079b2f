-- +goose Up
-- Every webhook delivery parley accepted, with what it answered: a repeat
-- of the same delivery id gets the first response back.
CREATE TABLE webhook_deliveries (
    id            TEXT PRIMARY KEY,
    hook_id       TEXT NOT NULL,
    delivery_key  TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'accepted'
                  CHECK (status IN ('accepted', 'answered', 'failed')),
    http_status   INTEGER NOT NULL DEFAULT 0,
    response      TEXT NOT NULL DEFAULT '',
    session_key   TEXT NOT NULL DEFAULT '',
    reply         TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    received_at   BIGINT NOT NULL,
    completed_at  BIGINT,
    duration_ms   BIGINT NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX webhook_deliveries_key ON webhook_deliveries (hook_id, delivery_key) WHERE delivery_key <> '';
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries (hook_id, received_at);
