package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
)

// postgresCPU is the CPU time every PostgreSQL server process of this
// machine has used so far (its backends serve every replica).
func postgresCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if d, err := procCPU(e.Name()); err == nil {
			total += d
		}
	}
	return total
}

// BenchmarkReplicaScaling runs 1, 2 and 3 `parley run` replicas (echo
// model) on one PostgreSQL under the same spread load: sessions whose
// messages go each to a random replica, all sent at once (each session's
// turns run in order on the replica holding it). It reports turns/s,
// parley's CPU per turn (all replicas), PostgreSQL's CPU per turn (every
// server process of the machine) and the database's transactions per
// turn (pg_stat_database, less the benchmark's own reads). Run it once:
//
//	PARLEY_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkReplicaScaling -benchtime 1x ./cmd/parley
func BenchmarkReplicaScaling(b *testing.B) {
	const sessions, perSession = 120, 10
	for n := 1; n <= 3; n++ {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for range b.N {
				benchReplicas(b, n, sessions, perSession)
			}
		})
	}
}

func benchReplicas(b *testing.B, n, sessions, perSession int) {
	pgURL := dbtest.PostgresURL(b)
	procs := make([]*replicaProc, n)
	for i := range procs {
		port := freePort(b)
		config := "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n  queue_cap: 100\n" +
			"agents:\n  - id: default\n    model: echo\n    queue_mode: followup\n"
		procs[i] = startReplica(b, config, port)
	}
	c := replicaClient{http: &http.Client{Timeout: 30 * time.Second}}
	ids := make([]string, sessions)
	for i := range ids {
		var s struct {
			ID string `json:"id"`
		}
		if _, err := c.do("POST", procs[i%n].url+"/v1/sessions", map[string]any{}, &s); err != nil {
			b.Fatal(err)
		}
		ids[i] = s.ID
	}
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	xacts := func() int64 {
		var v int64
		if err := db.QueryRow("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	answered := func() int {
		var v int
		if err := db.QueryRow("SELECT COUNT(*) FROM messages WHERE role = 'assistant'").Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	parleyCPU := func() time.Duration {
		var d time.Duration
		for _, p := range procs {
			d += p.cpu()
		}
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cpu0, pg0, x0 := parleyCPU(), postgresCPU(), xacts()
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perSession {
				for {
					_, err := c.do("POST", procs[rand.IntN(n)].url+"/v1/sessions/"+id+"/messages",
						map[string]string{"content": fmt.Sprintf("message %d", k)}, nil)
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	polls := 0
	total := sessions * perSession
	for answered() < total {
		polls++
		if ctx.Err() != nil {
			b.Fatalf("%d of %d turns answered in 5 minutes", answered(), total)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu, pg, x := parleyCPU()-cpu0, postgresCPU()-pg0, xacts()-x0-int64(polls)-2
	b.ReportMetric(float64(total)/elapsed.Seconds(), "turns/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(total), "parley-cpu-ms/turn")
	b.ReportMetric(float64(pg.Microseconds())/1000/float64(total), "pg-cpu-ms/turn")
	b.ReportMetric(float64(x)/float64(total), "db-xacts/turn")
	for _, p := range procs {
		p.stop(30 * time.Second)
	}
}
