-- +goose Up
-- A sender's claim on a reply is its own lease, apart from next_attempt_at
-- (when the platform lets us try again): taking a claim back never cuts a
-- backoff short. The claimer is named so a restarted process takes back at
-- once what its previous life claimed and never finished.
ALTER TABLE outbox ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN claim_instance TEXT NOT NULL DEFAULT '';
