-- +goose Up
-- A session's revision counts every change to its live context (an append,
-- a compaction, a rewind), so a cached copy of its history can be checked
-- against the database with one read of the session's row.
ALTER TABLE sessions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
