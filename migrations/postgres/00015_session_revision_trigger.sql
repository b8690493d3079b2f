-- +goose Up
-- Every change to a session's row bumps its revision: parley's own updates
-- do so themselves, and this trigger does it for any other, such as a
-- parent's deletion setting its children's parent_id to NULL, an update by
-- a replica still running an older release, or one made by hand. A copy of
-- a session held in memory is checked against its revision.
-- +goose StatementBegin
CREATE FUNCTION sessions_bump_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.revision := OLD.revision + 1;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER sessions_revision BEFORE UPDATE ON sessions FOR EACH ROW
    WHEN (NEW.revision = OLD.revision) EXECUTE FUNCTION sessions_bump_revision();
