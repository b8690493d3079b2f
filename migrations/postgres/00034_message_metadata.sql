-- +goose Up
-- A message's metadata: a JSON object of what is said about the message
-- rather than in it (an assistant message's system_prompt_digest, the
-- SHA-256 of the system prompt its turn sent, so two runs can be compared;
-- a user message's snapshot_id from a message.user hook). NULL for none.
-- The archive keeps it as messages does.
ALTER TABLE messages ADD COLUMN metadata TEXT;
ALTER TABLE message_archive ADD COLUMN metadata TEXT;
