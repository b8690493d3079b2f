-- +goose Up
-- What each session's files hold, kept as they change, so that storing a
-- file checks sessions.files.max_session_bytes, and a session's usage is
-- read, without adding up the session's files (which grew with them).
-- A trigger keeps it as file_store_usage's total is kept (migration
-- 00040): every insert, delete (a session's deletion included) and resize.
CREATE TABLE session_file_usage (
    session_id  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    files       BIGINT NOT NULL,
    bytes       BIGINT NOT NULL
);
INSERT INTO session_file_usage (session_id, files, bytes)
SELECT session_id, count(*), SUM(size) FROM session_files GROUP BY session_id;
-- +goose StatementBegin
CREATE FUNCTION session_files_session_usage() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE session_file_usage SET files = files - 1, bytes = bytes - OLD.size WHERE session_id = OLD.session_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO session_file_usage (session_id, files, bytes) VALUES (NEW.session_id, 1, NEW.size)
        ON CONFLICT (session_id) DO UPDATE SET files = session_file_usage.files + 1, bytes = session_file_usage.bytes + excluded.bytes;
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
-- Three triggers, named as SQLite's are.
CREATE TRIGGER session_files_session_usage_insert AFTER INSERT ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_session_usage();
CREATE TRIGGER session_files_session_usage_delete AFTER DELETE ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_session_usage();
CREATE TRIGGER session_files_session_usage_update AFTER UPDATE OF size, session_id ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_session_usage();
-- Nothing adds up a session's sizes any more (migration 00041's reason).
DROP INDEX session_files_sizes;
