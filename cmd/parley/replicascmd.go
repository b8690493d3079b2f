package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil"
)

// replicasCommand lists the replicas sharing the configured PostgreSQL.
var replicasCommand = &command{name: "replicas", args: "[--config FILE] [--json]", summary: "list the live replicas sharing the database",
	about: "Lists the parley run processes sharing the configured PostgreSQL database: each one's id (its name and a random suffix), " +
		"host and process, when it started, how long ago its last heartbeat was, the channels it is configured with and those it runs, " +
		"and its load (sessions with work, messages waiting). A replica whose heartbeat is older than gateway.replica_lease is taken over " +
		"and no longer listed. On SQLite, one process owns the database and there are no replicas.",
	examples: []string{"parley replicas", "parley replicas --json"},
	run:      func(ctx context.Context, s streams, args []string) error { return cmdReplicas(ctx, args, s.out) }}

func cmdReplicas(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("replicas")
	asJSON := fs.Bool("json", false, "print JSON")
	_, db, err := fs.open(ctx, args, 0)
	if err != nil {
		return err
	}
	defer db.Close()
	if db.Dialect != dbutil.Postgres {
		fmt.Fprintln(stdout, "no replicas: the database is SQLite, which one parley run process owns; replicas share a PostgreSQL database (database.url)")
		return nil
	}
	list, err := cluster.List(ctx, db)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"replicas": nonNil(list)})
	}
	return printTable(stdout, "no live replicas: no parley run process is using this database",
		"REPLICA\tHOST\tPID\tSTARTED\tHEARTBEAT\tRUNS\tSESSIONS\tWAITING", list, func(r cluster.Replica) string {
			runs := strings.Join(r.Channels, ",")
			if runs == "" {
				runs = "-"
			}
			return fmt.Sprintf("%s\t%s\t%d\t%s\t%s ago\t%s\t%d\t%d", r.ID, r.Host, r.PID, r.Started.Local().Format("2006-01-02 15:04:05"),
				(time.Duration(r.HeartbeatAgeMS) * time.Millisecond).Round(100*time.Millisecond), runs, r.Lanes, r.Queued)
		})
}
