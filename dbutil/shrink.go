package dbutil

import "context"

// ShrinkMemory hands back the memory SQLite's connections hold for their
// page caches (each up to about 2 MiB, filled by a busy spell): the idle
// reader connections are closed (the next read opens one again) and the
// writer's cache is released, and then SQLite's allocator unmaps the
// regions it kept for reuse (trimSQLiteHeap). A no-op on PostgreSQL, whose
// caches are the server's.
func (d *DB) ShrinkMemory(ctx context.Context) error {
	if d.Dialect != SQLite {
		return nil
	}
	d.read.SetMaxIdleConns(0)
	d.read.SetMaxIdleConns(d.readConns)
	_, err := d.write.ExecContext(ctx, "PRAGMA shrink_memory")
	// The writer's connection goes too when it is idle, with its schema
	// and the statements a busy spell prepared on it: the next write
	// opens it again, configured by the same DSN, and database/sql
	// prepares a cached statement again on it at its next use.
	d.write.SetMaxIdleConns(0)
	d.write.SetMaxIdleConns(1)
	if terr := trimSQLiteHeap(); err == nil {
		err = terr
	}
	return err
}
