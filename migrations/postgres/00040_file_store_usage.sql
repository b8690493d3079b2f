-- +goose Up
-- What every session's files hold together, kept as they change, so that
-- storing a file checks sessions.files.max_total_bytes without adding up
-- every file there is (which grew with the store). A trigger keeps it:
-- every insert, delete (a session's deletion included) and resize.
CREATE TABLE file_store_usage (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    bytes  BIGINT NOT NULL
);
INSERT INTO file_store_usage (id, bytes) SELECT 1, COALESCE(SUM(size), 0) FROM session_files;
-- +goose StatementBegin
CREATE FUNCTION session_files_usage() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE file_store_usage SET bytes = bytes + NEW.size WHERE id = 1;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE file_store_usage SET bytes = bytes - OLD.size WHERE id = 1;
    ELSE
        UPDATE file_store_usage SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
-- Three triggers, named as SQLite's are.
CREATE TRIGGER session_files_usage_insert AFTER INSERT ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_usage();
CREATE TRIGGER session_files_usage_delete AFTER DELETE ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_usage();
CREATE TRIGGER session_files_usage_update AFTER UPDATE OF size ON session_files
    FOR EACH ROW EXECUTE FUNCTION session_files_usage();
