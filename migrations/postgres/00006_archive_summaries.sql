-- +goose Up
-- A compaction summary takes the seq of the last message it summarized, so a
-- later compaction archives that summary beside the message whose seq it
-- shares. The archive's key therefore includes the summary flag.
ALTER TABLE message_archive DROP CONSTRAINT message_archive_session_id_seq_key;
CREATE UNIQUE INDEX message_archive_seq ON message_archive (session_id, seq, summary);
