-- +goose Up
-- Which run of the process accepted a message: recovery on start takes what
-- earlier runs left, never what this run is already answering.
ALTER TABLE inbound ADD COLUMN instance TEXT NOT NULL DEFAULT '';
