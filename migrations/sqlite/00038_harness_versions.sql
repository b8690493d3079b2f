-- +goose Up
-- Each harness version a session has used, as it was: a harness changed in
-- the config is a new version, and the sessions that began on the old one
-- keep it (their metadata names the id and version). version is a digest of
-- spec, the harness's settings as JSON.
CREATE TABLE harness_versions (
    harness_id  TEXT NOT NULL,
    version     TEXT NOT NULL,
    spec        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (harness_id, version)
);
