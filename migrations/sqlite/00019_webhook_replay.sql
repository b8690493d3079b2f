-- +goose Up
-- The signatures (and GitHub delivery ids) of accepted webhook requests,
-- kept while a copy of the request would still pass its checks: a second
-- use within that time is refused. In the database, so every replica
-- sees every accepted request.
CREATE TABLE webhook_replay (
    hook_id     TEXT NOT NULL,
    digest      TEXT NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (hook_id, digest)
);
CREATE INDEX webhook_replay_expires ON webhook_replay (expires_at);
