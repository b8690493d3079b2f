-- +goose Up
-- Groups let in under groups.policy "pairing": an approved person paired
-- the group by sending /pair in it. Groups in the config's groups.allow
-- are not stored.
CREATE TABLE allowed_groups (
    adapter     TEXT NOT NULL,
    chat_id     TEXT NOT NULL,
    paired_by   TEXT NOT NULL,
    approved_at INTEGER NOT NULL,
    PRIMARY KEY (adapter, chat_id)
);
