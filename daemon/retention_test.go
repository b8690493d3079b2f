package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/webhooks"
)

// A cron fire's and a webhook delivery's sessions are archived when their
// run ends, so they don't pile up among the active sessions; they stay
// readable.
func TestRunSessionsAreArchivedWhenTheyEnd(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\n"+
			"cron:\n  jobs:\n    - id: tick\n      schedule: \"0 9 * * *\"\n      prompt: \"tick report\"\n"+
			"hooks:\n  - id: ci\n    auth: hmac\n    secret: "+hookSecret+"\n    prompt: \"CI failed on {{.repo}}\"\n",
			func(d *Daemon) map[adapters.ID]adapters.Adapter {
				return map[adapters.ID]adapters.Adapter{"cron": d.cron,
					webhooks.AdapterID: webhooks.New(webhooks.Options{Hooks: d.cfg().Hooks, DB: d.db, Notify: d.gw.Notify})}
			})
		defer stop()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := d.cron.RunNow(ctx, "tick"); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("RunNow: %v", err)
			}
			time.Sleep(20 * time.Millisecond) // until the scheduler's Start has run
		}
		if status, out := postHook(t, http.DefaultClient, url+"/hooks/ci", []byte(`{"repo":"parley"}`)); status != http.StatusAccepted {
			t.Fatalf("delivery: %d %v", status, out)
		}
		count := func(surface string, status sessions.Status) []sessions.Session {
			page, err := d.sessions.List(ctx, sessions.ListOptions{Limit: 10, Surface: surface, Status: status})
			if err != nil {
				t.Fatal(err)
			}
			return page.Sessions
		}
		for _, surface := range []string{sessions.SurfaceCron, sessions.SurfaceWebhook} {
			deadline := time.Now().Add(20 * time.Second)
			for len(count(surface, sessions.StatusArchived)) != 1 || len(count(surface, sessions.StatusActive)) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s sessions: %d active, %d archived; want its run's archived", surface,
						len(count(surface, sessions.StatusActive)), len(count(surface, sessions.StatusArchived)))
				}
				time.Sleep(10 * time.Millisecond)
			}
			s := count(surface, sessions.StatusArchived)[0]
			msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
			if err != nil || len(msgs) < 2 || s.ResetReason != sessions.ReasonFinished {
				t.Fatalf("archived %s session %+v reads %d messages (%v)", surface, s, len(msgs), err)
			}
		}
	})
}

// parley sessions prune --older-than removes the sessions archived before
// then, with their messages, and says so; the daemon does the same on its
// own with sessions.prune_archived_after. Active sessions stay, however old.
func TestPruneArchivedSessions(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		path := writeConfigAt(t, dbURL, "sessions:\n  prune_archived_after: 1h\n")
		if code, out, errOut := parley(t, ctx, "migrate", "--config", path); code != 0 {
			t.Fatalf("migrate: %d %q %q", code, out, errOut)
		}
		db, err := dbutil.Open(ctx, dbutil.Options{URL: dbURL})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// mk makes a session with two messages at (now - age), archived then
		// if archive is set.
		mk := func(name string, age time.Duration, archive bool) sessions.ID {
			t.Helper()
			at := time.Now().Add(-age)
			st := sessions.NewStore(db, sessions.WithClock(func() time.Time { return at }))
			s, _, err := st.Resolve(ctx, sessions.CronKey(name, at, "default"), sessions.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			for _, role := range []sessions.Role{sessions.RoleUser, sessions.RoleAssistant} {
				if _, err := st.Append(ctx, s.ID, sessions.Message{Role: role, Content: name}); err != nil {
					t.Fatal(err)
				}
			}
			if archive {
				if _, err := st.Archive(ctx, s.ID, sessions.ReasonFinished); err != nil {
					t.Fatal(err)
				}
			}
			return s.ID
		}
		exists := func(id sessions.ID) bool {
			_, err := sessions.NewStore(db).Session(ctx, id)
			return err == nil
		}
		old := mk("old", 72*time.Hour, true)
		stale := mk("stale", 3*time.Hour, true)
		recent := mk("recent", 0, true)
		active := mk("active", 72*time.Hour, false)

		code, out, errOut := parley(t, ctx, "sessions", "prune", "--older-than", "2d", "--config", path)
		if code != 0 || !strings.Contains(out, "removed 1 archived sessions (2 messages)") {
			t.Fatalf("sessions prune: %d %q %q", code, out, errOut)
		}
		if exists(old) || !exists(stale) || !exists(recent) || !exists(active) {
			t.Fatalf("after prune --older-than 2d: old %v stale %v recent %v active %v", exists(old), exists(stale), exists(recent), exists(active))
		}
		if code, _, errOut := parley(t, ctx, "sessions", "prune", "--config", path); code != 2 || !strings.Contains(errOut, "--older-than is required") {
			t.Fatalf("no --older-than: %d %q", code, errOut)
		}
		if code, _, errOut := parley(t, ctx, "sessions", "prune", "--older-than", "soon", "--config", path); code != 2 || !strings.Contains(errOut, "not an age") {
			t.Fatalf("a bad age: %d %q", code, errOut)
		}

		// The daemon, keeping archived sessions for 1h, removes the stale one.
		_, _, stop := testDaemonAt(t, path, apiOnly)
		defer stop()
		deadline := time.Now().Add(20 * time.Second)
		for exists(stale) {
			if time.Now().After(deadline) {
				t.Fatal("the daemon kept a session archived 3h ago, with prune_archived_after: 1h")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !exists(recent) || !exists(active) {
			t.Fatalf("the daemon pruned too much: recent %v active %v", exists(recent), exists(active))
		}
	})
}
