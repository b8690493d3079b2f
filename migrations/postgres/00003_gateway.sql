-- +goose Up
-- Every platform message the gateway accepted, stored before the platform is
-- told it arrived; the unique key drops a redelivery.
CREATE TABLE inbound (
    id                  TEXT PRIMARY KEY,
    adapter             TEXT NOT NULL,
    chat_id             TEXT NOT NULL,
    platform_message_id TEXT NOT NULL,
    payload             TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'accepted'
                        CHECK (status IN ('accepted', 'done', 'failed', 'marked')),
    session_id          TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    error               TEXT NOT NULL DEFAULT '',
    received_at         BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (adapter, chat_id, platform_message_id)
);
CREATE INDEX inbound_unfinished ON inbound (received_at) WHERE status = 'accepted';

-- Replies waiting to be sent, one row per chunk. The idempotency key makes
-- writing the same reply twice a no-op.
CREATE TABLE outbox (
    id                  TEXT PRIMARY KEY,
    idempotency_key     TEXT NOT NULL UNIQUE,
    session_id          TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    inbound_id          TEXT REFERENCES inbound (id) ON DELETE SET NULL,
    adapter             TEXT NOT NULL,
    chat_id             TEXT NOT NULL,
    reply_to            TEXT NOT NULL DEFAULT '',
    text                TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'sent', 'failed')),
    attempts            BIGINT NOT NULL DEFAULT 0,
    next_attempt_at     BIGINT NOT NULL,
    last_error          TEXT NOT NULL DEFAULT '',
    platform_message_id TEXT NOT NULL DEFAULT '',
    created_at          BIGINT NOT NULL,
    sent_at             BIGINT
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'pending';
-- Replies to one chat go out in order: only a chat's oldest pending row is due.
CREATE INDEX outbox_chat_order ON outbox (adapter, chat_id, id) WHERE status = 'pending';
