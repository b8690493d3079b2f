-- +goose Up
-- A streamed reply is shown by editing one message as it grows; its final
-- text goes through the outbox as an edit of that message, so it is
-- delivered once, durably, like any reply.
ALTER TABLE outbox ADD COLUMN edit_message_id TEXT NOT NULL DEFAULT '';
