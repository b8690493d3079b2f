-- +goose Up
-- Replicas sharing one PostgreSQL database each own the messages they
-- accepted: the owner renews the lease while its turns run, and another
-- replica takes over a message only once its owner's lease has lapsed.
ALTER TABLE inbound ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE inbound ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
