-- +goose Up
-- People an operator blocked on a channel: their messages are dropped
-- without a pairing code, whatever the channel's direct-chat policy
-- (an open one aside). Unblocking deletes the row.
CREATE TABLE blocked_users (
    adapter      TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    blocked_at   BIGINT NOT NULL,
    PRIMARY KEY (adapter, user_id)
);

-- The dashboard's charts read the replies and the messages received of
-- the last days by time.
CREATE INDEX messages_assistant_created ON messages (created_at) WHERE role = 'assistant';
CREATE INDEX message_archive_assistant_created ON message_archive (created_at) WHERE role = 'assistant';
CREATE INDEX inbound_received ON inbound (received_at);
