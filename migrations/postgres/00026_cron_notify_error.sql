-- +goose Up
-- Why a finished cron run's result has not reached its notify targets (a
-- target naming no running channel, say), for `parley cron runs`; cleared
-- once every target has it.
ALTER TABLE cron_runs ADD COLUMN notify_error TEXT NOT NULL DEFAULT '';
