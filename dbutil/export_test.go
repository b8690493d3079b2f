package dbutil

// Queued is how many transactions wait for the SQLite writer now.
func (d *DB) Queued() int { return len(d.txs) }

// SyncsWAL reports whether the writer's commits wait for an fsync of the
// log made by group commit's acker.
func (d *DB) SyncsWAL() bool { return d.syncWAL.Load() != nil }

// WrapSyncWAL puts wrap around the acker's fsync of the log.
func (d *DB) WrapSyncWAL(wrap func(sync func() error) error) {
	sync := *d.syncWAL.Load()
	wrapped := func() error { return wrap(sync) }
	d.syncWAL.Store(&wrapped)
}

// ErrFsync marks a failed fsync of the log (walsync.go).
var ErrFsync = errFsync

// CheckpointOnce runs the checkpointer for one wake-up, as the writer's
// would.
func (d *DB) CheckpointOnce() {
	wake, done := make(chan struct{}, 1), make(chan struct{})
	wake <- struct{}{}
	close(wake)
	d.checkpointLoop(wake, done)
}

// Checkpoints is how many checkpoints the checkpointer has run.
func (d *DB) Checkpoints() int64 {
	ran, _ := d.CheckpointStats()
	return ran
}
