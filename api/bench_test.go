package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/parleyd/parley/api"
)

// BenchmarkEventLogFanout: one run's events reach 1,000 readers of one
// busy session, or 1,000 sessions with one reader each. It reports the
// events delivered per second.
func BenchmarkEventLogFanout(b *testing.B) {
	for _, tc := range []struct {
		name     string
		sessions int
	}{{"one_session", 1}, {"1000_sessions", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			const readers = 1000
			l := api.NewEventLog(nil)
			runs := make([]string, tc.sessions)
			for i := range runs {
				runs[i] = l.Start("s" + strconv.Itoa(i))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			perReader := b.N
			if tc.sessions > 1 {
				perReader = b.N / tc.sessions
				if perReader == 0 {
					perReader = 1
				}
			}
			for i := range readers {
				sid := "s" + strconv.Itoa(i%tc.sessions)
				s := l.Subscribe(sid, api.SubscribeOptions{})
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer s.Close()
					for n := 0; n < perReader; {
						batch, err := s.Next(ctx)
						if err != nil {
							return
						}
						n += len(batch)
					}
				}()
			}
			data := json.RawMessage(`{"text":"hello"}`)
			b.ResetTimer()
			for i := range perReader * tc.sessions {
				sid := i % tc.sessions
				l.Append(runs[sid], api.Event{SessionID: "s" + strconv.Itoa(sid), Type: api.TypeMessageDelta, Data: data})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(perReader*readers)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
