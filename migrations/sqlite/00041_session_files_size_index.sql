-- +goose Up
-- Storing a file adds up the sizes of its session's other files (for
-- sessions.files.max_session_bytes): this index holds what that reads, so
-- the sum never reads the files' rows, whose data may be large.
CREATE INDEX session_files_sizes ON session_files (session_id, name, size);
