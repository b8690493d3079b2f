package dbutil

// Queued is how many transactions wait for the SQLite writer now.
func (d *DB) Queued() int { return len(d.txs) }
