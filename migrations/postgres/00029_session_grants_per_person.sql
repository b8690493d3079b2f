-- +goose Up
-- "Always in this chat" is kept per person who answered: in a group, one
-- member's answer holds for that member only (unless the operator shares
-- group grants), so two members' answers for one tool are two rows.
ALTER TABLE permission_session_rules DROP CONSTRAINT permission_session_rules_pkey;
ALTER TABLE permission_session_rules ADD PRIMARY KEY (session_id, tool, granted_by);
