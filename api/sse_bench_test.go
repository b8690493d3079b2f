package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// BenchmarkSSEFanOut measures the SSE stream over real HTTP: 1,000 clients
// hold GET /v1/sessions/{id}/events open while events are appended to the
// EventLog, either all on one busy session ("one-session") or each on a
// session of its own ("many-sessions"). Every client receives b.N events.
// It reports the events delivered to clients per second and the memory per
// open connection (heap and stack in use, client and server side together,
// since both live in this process). Run it with:
//
//	go test ./api -run '^$' -bench BenchmarkSSEFanOut
//
// which takes about 5 s on 2 cores (add -benchtime 200x for a quicker run).
func BenchmarkSSEFanOut(b *testing.B) {
	const clients = 1000
	st := sessions.NewStore(dbtest.SQLite(b))
	ids := make([]sessions.ID, clients)
	for i := range ids {
		s, err := st.Create(context.Background(), sessions.Key{Surface: sessions.SurfaceAPI, SurfaceID: "bench-" + strconv.Itoa(i), AgentID: "main"}, sessions.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = s.ID
	}
	for _, tc := range []struct {
		name     string
		sessions int
	}{{"one-session", 1}, {"many-sessions", clients}} {
		b.Run(tc.name, func(b *testing.B) {
			log := api.NewEventLog(nil)
			srv := httptest.NewServer(api.New(api.Options{Store: st, Events: log, Tokens: []string{token}, Heartbeat: time.Hour}))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}}
			defer client.CloseIdleConnections()
			runs := make([]string, tc.sessions)
			for i := range runs {
				runs[i] = log.Start(string(ids[i])) // busy: streams replay it from its start
			}

			before := memInUse()
			ctx, cancel := context.WithCancel(context.Background())
			var ready, done sync.WaitGroup
			errs := make(chan error, clients)
			for i := range clients {
				ready.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					errs <- readEvents(ctx, client, srv.URL, ids[i%tc.sessions], b.N, ready.Done)
				}()
			}
			ready.Wait()
			perConn := float64(memInUse()-before) / clients

			data := json.RawMessage(`{"text":"hello "}`)
			b.ResetTimer()
			for range b.N {
				for s, run := range runs {
					log.Append(run, api.Event{SessionID: string(ids[s]), Type: api.TypeMessageDelta, Data: data})
				}
			}
			done.Wait()
			b.StopTimer()
			cancel()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*clients/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(perConn, "bytes/conn")
		})
	}
}

// readEvents opens one stream, calls connected once the server has
// subscribed it, and reads until n events arrived.
func readEvents(ctx context.Context, client *http.Client, base string, id sessions.ID, n int, connected func()) error {
	once := sync.OnceFunc(connected)
	defer once()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/sessions/"+string(id)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	// The server writes its preamble after subscribing.
	if _, err := rd.ReadSlice('\n'); err != nil {
		return err
	}
	once()
	for got := 0; got < n; {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return err
		}
		if bytes.HasPrefix(line, []byte("data: ")) {
			got++
		}
	}
	return nil
}

func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
