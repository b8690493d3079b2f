package dbutil_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// childEnv, set, makes TestCheckpointsSurviveSIGKILL the writing child:
// the database to write is its value.
const childEnv = "PARLEY_TEST_CHECKPOINT_CHILD"

// A process writing while the checkpointer copies the log into the
// database is SIGKILLed, three times, at a moment it has run checkpoints:
// every write it was told of is there after a restart, and the database
// is sound.
func TestCheckpointsSurviveSIGKILL(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		writeUntilKilled(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a writing process three times")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/crash.db"
	acked := map[int64]bool{}
	for life := range 3 {
		cmd := exec.Command(exe, "-test.run=^TestCheckpointsSurviveSIGKILL$")
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child prints each write once it is answered, and how many
		// checkpoints have run; it is killed two checkpoints into its life.
		lines := bufio.NewScanner(out)
		killed := false
		deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		for lines.Scan() {
			f := strings.Fields(lines.Text())
			if len(f) != 2 {
				continue
			}
			id, _ := strconv.ParseInt(f[0], 10, 64)
			acked[id] = true
			if n, _ := strconv.Atoi(f[1]); n >= 2 && !killed {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		deadline.Stop()
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("life %d: the child stopped before its second checkpoint (%d writes answered in all)", life, len(acked))
		}
	}

	ctx := context.Background()
	db, err := dbutil.Open(ctx, dbutil.Options{URL: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.Read().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity check after three kills: %q, %v", check, err)
	}
	stored := map[int64]bool{}
	rows, err := db.Read().QueryContext(ctx, "SELECT id FROM crash")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for id := range acked {
		if !stored[id] {
			lost++
		}
	}
	if lost > 0 || len(acked) < 2000 {
		t.Fatalf("%d of %d answered writes lost (want none of at least 2,000)", lost, len(acked))
	}
}

// writeUntilKilled writes page-sized rows from eight goroutines, printing
// each row's id once its commit is answered, with the checkpoints run so
// far; it never returns on its own.
func writeUntilKilled(path string) {
	ctx := context.Background()
	db, err := dbutil.Open(ctx, dbutil.Options{URL: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := db.Write().ExecContext(ctx, "CREATE TABLE IF NOT EXISTS crash (id INTEGER PRIMARY KEY, body TEXT)"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Ids go on from the last life's.
	var next atomic.Int64
	var last int64
	if err := db.Read().QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM crash").Scan(&last); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	next.Store(last + 1000) // past any write the kill cut before it was answered
	out := make(chan string, 1024)
	for range 8 {
		go func() {
			for {
				id := next.Add(1)
				if _, err := db.Write().ExecContext(ctx, "INSERT INTO crash VALUES ($1, $2)", id, pageBody); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				out <- fmt.Sprintf("%d %d", id, db.Checkpoints())
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	for line := range out {
		fmt.Fprintln(w, line)
		if len(out) == 0 {
			w.Flush()
		}
	}
}
