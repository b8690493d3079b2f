-- +goose Up
-- Each replica's key for the API requests it passes to another (the hop
-- header's HMAC): a client can't make a replica take its request for
-- one another replica passed on.
ALTER TABLE replicas ADD COLUMN hop_key TEXT NOT NULL DEFAULT '';
