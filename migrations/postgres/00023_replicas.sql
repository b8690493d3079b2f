-- +goose Up
-- The replicas sharing this database. instance is unique per process
-- (the replica's name and a random suffix); heartbeat_at is renewed every
-- heartbeat, on the database's clock; fenced_at is set once the replica's
-- heartbeat lapsed and a survivor took its work over: from then on the
-- replica may write nothing (see parley_fence).
CREATE TABLE replicas (
    instance      TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           BIGINT NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    api_url       TEXT NOT NULL DEFAULT '',
    started_at    BIGINT NOT NULL,
    heartbeat_at  BIGINT NOT NULL,
    fenced_at     BIGINT,
    recovered     BOOLEAN NOT NULL DEFAULT FALSE,
    adapters      TEXT NOT NULL DEFAULT '',
    channels      TEXT NOT NULL DEFAULT '',
    lanes         BIGINT NOT NULL DEFAULT 0,
    queued        BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX replicas_live ON replicas (name) WHERE fenced_at IS NULL;

-- What one replica holds at a time: a session's lane ("lane:<hash>") or a
-- channel ("channel:<adapter>"). A hold whose replica is fenced is free.
CREATE TABLE holds (
    name      TEXT PRIMARY KEY,
    instance  TEXT NOT NULL,
    since     BIGINT NOT NULL
);
CREATE INDEX holds_instance ON holds (instance);

-- Messages handed to the replica that holds their session's lane: lane
-- names it, and owner (the inbound row's) is that replica.
ALTER TABLE inbound ADD COLUMN lane TEXT;
CREATE INDEX inbound_forwarded ON inbound (owner, received_at) WHERE status = 'accepted' AND lane IS NOT NULL;

-- The replica that queued a reply: replies to the replica's own channels
-- (the API, webhooks) are sent by it while it lives.
ALTER TABLE outbox ADD COLUMN origin TEXT NOT NULL DEFAULT '';

-- parley_fence is the first statement of every write transaction of a
-- replica: it waits for a survivor's fencing of the replica (which takes
-- the same lock exclusively) and reports whether the replica is live. A
-- transaction that began before the fence commits before it; one after
-- sees the fence and is refused.
-- +goose StatementBegin
CREATE FUNCTION parley_fence(inst TEXT) RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1885434465, hashtext(inst));
    RETURN EXISTS (SELECT 1 FROM replicas WHERE instance = inst AND fenced_at IS NULL);
END
$$;
-- +goose StatementEnd
