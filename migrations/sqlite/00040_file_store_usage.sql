-- +goose Up
-- What every session's files hold together, kept as they change, so that
-- storing a file checks sessions.files.max_total_bytes without adding up
-- every file there is (which grew with the store). Triggers keep it:
-- every insert, delete (a session's deletion included) and resize.
CREATE TABLE file_store_usage (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    bytes  INTEGER NOT NULL
);
INSERT INTO file_store_usage (id, bytes) SELECT 1, COALESCE(SUM(size), 0) FROM session_files;
-- +goose StatementBegin
CREATE TRIGGER session_files_usage_insert AFTER INSERT ON session_files
BEGIN
    UPDATE file_store_usage SET bytes = bytes + NEW.size WHERE id = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER session_files_usage_delete AFTER DELETE ON session_files
BEGIN
    UPDATE file_store_usage SET bytes = bytes - OLD.size WHERE id = 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER session_files_usage_update AFTER UPDATE OF size ON session_files
BEGIN
    UPDATE file_store_usage SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
END;
-- +goose StatementEnd
