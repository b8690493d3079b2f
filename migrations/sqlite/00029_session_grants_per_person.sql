-- +goose Up
-- "Always in this chat" is kept per person who answered: in a group, one
-- member's answer holds for that member only (unless the operator shares
-- group grants), so two members' answers for one tool are two rows.
CREATE TABLE permission_session_rules_new (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    decision    TEXT NOT NULL,
    granted_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool, granted_by)
);
INSERT INTO permission_session_rules_new (session_id, tool, decision, granted_by, created_at)
    SELECT session_id, tool, decision, granted_by, created_at FROM permission_session_rules;
DROP TABLE permission_session_rules;
ALTER TABLE permission_session_rules_new RENAME TO permission_session_rules;
