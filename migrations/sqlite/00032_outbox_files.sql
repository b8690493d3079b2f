-- +goose Up
-- A reply may be a file: the outbox row names it in a session's file
-- store (file_session_id, file_name), and the sender reads its bytes when
-- it sends; text is then its caption. Rows of text have both empty.
ALTER TABLE outbox ADD COLUMN file_session_id TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN file_name TEXT NOT NULL DEFAULT '';
