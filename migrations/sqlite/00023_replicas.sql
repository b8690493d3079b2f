-- +goose Up
-- Replicas share PostgreSQL only; a SQLite file has one process. The
-- tables and columns exist here too, so both engines have one schema.
CREATE TABLE replicas (
    instance      TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    api_url       TEXT NOT NULL DEFAULT '',
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    fenced_at     INTEGER,
    recovered     INTEGER NOT NULL DEFAULT 0,
    adapters      TEXT NOT NULL DEFAULT '',
    channels      TEXT NOT NULL DEFAULT '',
    lanes         INTEGER NOT NULL DEFAULT 0,
    queued        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX replicas_live ON replicas (name) WHERE fenced_at IS NULL;

CREATE TABLE holds (
    name      TEXT PRIMARY KEY,
    instance  TEXT NOT NULL,
    since     INTEGER NOT NULL
);
CREATE INDEX holds_instance ON holds (instance);

ALTER TABLE inbound ADD COLUMN lane TEXT;
CREATE INDEX inbound_forwarded ON inbound (owner, received_at) WHERE status = 'accepted' AND lane IS NOT NULL;
ALTER TABLE outbox ADD COLUMN origin TEXT NOT NULL DEFAULT '';
