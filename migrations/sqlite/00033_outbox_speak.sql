-- +goose Up
-- A reply may be spoken: the sender synthesizes the row's text when it
-- sends it and sends the audio as a voice note (the text itself when
-- synthesis fails), so a retry after a crash speaks it again rather than
-- keeping audio in the outbox. 1 for a spoken reply, 0 for the rest.
ALTER TABLE outbox ADD COLUMN speak INTEGER NOT NULL DEFAULT 0;
