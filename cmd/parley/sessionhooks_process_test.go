package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/signing"
)

// The built binary is SIGKILLed three times while sessions are being
// created and deleted through the API, with a session hook taking every
// lifecycle event: after the last restart, each session the database holds
// has its session.created posted under one id (however many POSTs a crash
// cost), each deleted one its session.deleted, and no event tells of a
// change that did not commit.
func TestSessionHookEventsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts parley four times")
	}
	const hookSecret = "9c1e3a5b7d9f1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d"
	var (
		mu    sync.Mutex
		ids   = map[string]string{} // event id -> "event session"
		posts int
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signing.Valid(r.Header.Get("X-Parley-Signature"), []byte(hookSecret), []byte(r.Header.Get("X-Parley-Timestamp")+"."+string(body))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev struct {
			ID, Event, SessionID string `json:"-"`
		}
		var raw map[string]any
		_ = json.Unmarshal(body, &raw)
		ev.ID, _ = raw["id"].(string)
		ev.Event, _ = raw["event"].(string)
		ev.SessionID, _ = raw["session_id"].(string)
		time.Sleep(5 * time.Millisecond) // a receiver that takes a moment: crashes land mid-POST too
		mu.Lock()
		posts++
		if prev, ok := ids[ev.ID]; ok && prev != ev.Event+" "+ev.SessionID {
			t.Errorf("event id %s was %q and then %q", ev.ID, prev, ev.Event+" "+ev.SessionID)
		}
		ids[ev.ID] = ev.Event + " " + ev.SessionID
		mu.Unlock()
	}))
	defer recv.Close()
	const token = "7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7a"
	dbPath := filepath.Join(t.TempDir(), "parley.db")
	cfg := "database:\n  url: " + dbPath + "\n" +
		"http:\n  listen: 127.0.0.1:0\n  tokens: [\"" + token + "\"]\n" +
		"session_hooks:\n  - url: " + recv.URL + "\n    secret: " + hookSecret + "\n    events: [session.created, session.deleted]\n"

	ctx := context.Background()
	created, deleted := map[string]bool{}, map[string]bool{} // as the API acknowledged them
	for life := range 4 {
		p, addr := startParleyHTTP(t, cfg)
		c := &client.Client{Base: "http://" + addr, Token: token}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var s struct {
					ID string `json:"id"`
				}
				if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": fmt.Sprintf("life %d, %d", life, i)}, &s); err != nil {
					return // the process died under it
				}
				mu.Lock()
				created[s.ID] = true
				mu.Unlock()
				if i%3 == 0 {
					if resp, err := c.Request(ctx, "DELETE", "/v1/sessions/"+s.ID, nil); err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusNoContent {
							mu.Lock()
							deleted[s.ID] = true
							mu.Unlock()
						}
					} else {
						return
					}
				}
			}
		}()
		if life < 3 {
			time.Sleep(400 * time.Millisecond)
			p.kill()
			close(stop)
			<-done
			continue
		}
		time.Sleep(200 * time.Millisecond)
		close(stop)
		<-done
		// The last life: every event the database holds is sent.
		live := map[string]bool{}
		for cursor := ""; ; {
			var page struct {
				Sessions []struct {
					ID string `json:"id"`
				} `json:"sessions"`
				Next string `json:"next_cursor"`
			}
			if err := c.Do(ctx, "GET", "/v1/sessions?limit=200&cursor="+cursor, nil, &page); err != nil {
				t.Fatal(err)
			}
			for _, s := range page.Sessions {
				live[s.ID] = true
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			byOccurrence := map[string]int{}
			for _, what := range ids {
				byOccurrence[what]++
			}
			missing := 0
			for id := range created {
				if byOccurrence["session.created "+id] != 1 {
					missing++
				}
			}
			for id := range deleted {
				if byOccurrence["session.deleted "+id] != 1 {
					missing++
				}
			}
			for id := range live {
				if byOccurrence["session.created "+id] != 1 {
					missing++
				}
			}
			for what, n := range byOccurrence {
				if n != 1 {
					t.Fatalf("%s was posted under %d ids", what, n)
				}
				// An event tells of a change that committed: a created
				// session is there, or its deletion was posted too.
				if ev, id, _ := strings.Cut(what, " "); ev == "session.created" && !live[id] && byOccurrence["session.deleted "+id] == 0 && missing == 0 {
					t.Fatalf("session.created was posted for %s, which the database does not hold", id)
				}
			}
			total, sent := len(created)+len(deleted), posts
			mu.Unlock()
			if missing == 0 {
				t.Logf("%d acknowledged changes over 3 SIGKILLs; %d events posted in %d POSTs", total, len(ids), sent)
				if total < 10 {
					t.Fatalf("only %d changes were made; the test made too few to mean much", total)
				}
				p.stop(30 * time.Second)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d acknowledged changes have no event posted once, after 60 s", missing)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
