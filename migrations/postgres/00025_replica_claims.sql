-- +goose Up
-- Reply callbacks are claimed like the outbox's replies: the claim is a
-- lease of its own (lease_until), apart from next_attempt_at, the backoff,
-- and names its claimer (claim_owner, and claim_instance for one run of a
-- process), so one sender POSTs each callback and a callback whose claimer
-- died is taken over when its lease lapses.
ALTER TABLE api_callbacks ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE api_callbacks ADD COLUMN claim_owner TEXT NOT NULL DEFAULT '';
ALTER TABLE api_callbacks ADD COLUMN claim_instance TEXT NOT NULL DEFAULT '';

-- Which running parley processes have a config job in their config file:
-- one row per job and process (instance), renewed while the process runs
-- and withdrawn when it stops. A config job is removed only once no live
-- row declares it, so a replica whose config lacks a job never removes
-- one another replica's config still has.
CREATE TABLE cron_config_declarations (
    job_id          TEXT NOT NULL REFERENCES cron_jobs (id) ON DELETE CASCADE,
    instance        TEXT NOT NULL,
    declared_until  BIGINT NOT NULL,
    PRIMARY KEY (job_id, instance)
);
CREATE INDEX cron_config_declarations_instance ON cron_config_declarations (instance);
