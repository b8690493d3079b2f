-- +goose Up
-- What people answered when asked whether a tool may run: "always in this
-- chat" holds for one session, "always" for one agent and user. Only
-- grants are stored; a denial is never remembered.
CREATE TABLE permission_session_rules (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool        TEXT NOT NULL,
    decision    TEXT NOT NULL,
    granted_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, tool)
);
CREATE TABLE permission_project_rules (
    agent_id    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    decision    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, user_id, tool)
);
