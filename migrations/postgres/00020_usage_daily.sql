-- +goose Up
-- What each user, session and agent spent a day (UTC), for the spend caps:
-- tokens of every kind, and dollars where the provider or the price table
-- gives them. Written with each reply, only while a cap is set.
CREATE TABLE usage_daily (
    day     TEXT NOT NULL,
    scope   TEXT NOT NULL,
    tokens  BIGINT NOT NULL DEFAULT 0,
    cost    DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (day, scope)
);
