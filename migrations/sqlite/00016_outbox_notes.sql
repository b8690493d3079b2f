-- +goose Up
-- Notes by chat: outbox rows that answer no inbound message (cron reports,
-- webhook notifications), which a chat's new session starts with.
CREATE INDEX outbox_notes ON outbox (adapter, chat_id, created_at) WHERE inbound_id IS NULL;
