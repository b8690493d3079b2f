package storetest

import (
	"errors"
	"sync"
	"time"

	"github.com/parleyd/parley/sessions"
)

var dm = sessions.ChatKey("telegram", "100", "100", "default")

func (e *env) resolve(key sessions.Key, p sessions.Policy) (sessions.Session, bool) {
	e.t.Helper()
	s, isNew, err := e.store.Resolve(e.ctx, key, p)
	if err != nil {
		e.t.Fatalf("Resolve(%s): %v", key, err)
	}
	return s, isNew
}

func (e *env) append(id sessions.ID, role sessions.Role, content string) sessions.Message {
	e.t.Helper()
	m, err := e.store.Append(e.ctx, id, sessions.Message{Role: role, Content: content})
	if err != nil {
		e.t.Fatalf("Append: %v", err)
	}
	return m
}

func (e *env) session(id sessions.ID) sessions.Session {
	e.t.Helper()
	s, err := e.store.Session(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Session(%s): %v", id, err)
	}
	return s
}

func testCreateAndResolve(e *env) {
	first, isNew := e.resolve(dm, sessions.Policy{})
	if !isNew || first.ID == "" || first.Status != sessions.StatusActive {
		e.t.Fatalf("first resolve: new=%v %+v", isNew, first)
	}
	if first.Key != dm {
		e.t.Fatalf("key round trip: got %+v, want %+v", first.Key, dm)
	}
	if !first.CreatedAt.Equal(e.clock.Now()) || !first.LastActiveAt.Equal(e.clock.Now()) {
		e.t.Fatalf("times: created %v active %v, clock %v", first.CreatedAt, first.LastActiveAt, e.clock.Now())
	}
	e.clock.Advance(time.Minute)
	again, isNew := e.resolve(dm, sessions.Policy{})
	if isNew || again.ID != first.ID {
		e.t.Fatalf("second resolve: new=%v id %s, want %s", isNew, again.ID, first.ID)
	}
	act, err := e.store.Active(e.ctx, dm)
	if err != nil || act.ID != first.ID {
		e.t.Fatalf("Active: %v %v", act.ID, err)
	}
	other := dm
	other.AgentID = "other"
	if s, isNew := e.resolve(other, sessions.Policy{}); !isNew || s.ID == first.ID {
		e.t.Fatal("a different agent shares the session")
	}
	ws := dm
	ws.WorkspaceID = "w1"
	if s, isNew := e.resolve(ws, sessions.Policy{}); !isNew || s.ID == first.ID {
		e.t.Fatal("a different workspace shares the session")
	}
	if _, err := e.store.Session(e.ctx, "0190c7a0-0000-7000-8000-000000000000"); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Session(unknown): %v", err)
	}
	if _, err := e.store.Active(e.ctx, sessions.ChatKey("telegram", "nobody", "nobody", "default")); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Active(unknown): %v", err)
	}
}

func testInvalidKey(e *env) {
	for _, k := range []sessions.Key{{}, {Surface: "telegram", SurfaceID: "1"}, {Surface: "a:b", SurfaceID: "1", AgentID: "x"}} {
		if _, _, err := e.store.Resolve(e.ctx, k, sessions.Policy{}); !errors.Is(err, sessions.ErrInvalidKey) {
			e.t.Errorf("Resolve(%+v) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := e.store.Reset(e.ctx, k); !errors.Is(err, sessions.ErrInvalidKey) {
			e.t.Errorf("Reset(%+v) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func testIdleReset(e *env) {
	p := sessions.Policy{IdleTimeout: 30 * time.Minute}
	s1, _ := e.resolve(dm, p)
	e.append(s1.ID, sessions.RoleUser, "hello")

	// Activity keeps it alive past the timeout measured from creation.
	e.clock.Advance(20 * time.Minute)
	e.append(s1.ID, sessions.RoleUser, "still here")
	e.clock.Advance(20 * time.Minute)
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s1.ID {
		e.t.Fatal("reset although the session was active 20 minutes ago")
	}
	e.clock.Advance(30 * time.Minute) // now 50 minutes idle
	s2, isNew := e.resolve(dm, p)
	if !isNew || s2.ID == s1.ID {
		e.t.Fatal("no idle reset after 50 idle minutes")
	}
	old := e.session(s1.ID)
	if old.Status != sessions.StatusArchived || old.ResetReason != sessions.ReasonIdle || !old.ArchivedAt.Equal(e.clock.Now()) {
		e.t.Fatalf("old session after idle reset: %+v", old)
	}
	msgs, err := e.store.Messages(e.ctx, s1.ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) != 2 {
		e.t.Fatalf("archived session's messages: %d %v", len(msgs), err)
	}
	if again, isNew := e.resolve(dm, p); isNew || again.ID != s2.ID {
		e.t.Fatal("the new session did not stick")
	}
}

func testDailyResetAcrossTimeZone(e *env) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		e.t.Fatal(err)
	}
	p := sessions.Policy{DailyReset: true, DailyResetHour: 4, Location: tokyo}
	// 23:50 UTC is 08:50 in Tokyo; crossing UTC midnight is not a Tokyo reset.
	e.clock.Set(time.Date(2026, 6, 1, 23, 50, 0, 0, time.UTC))
	s1, _ := e.resolve(dm, p)
	e.clock.Set(time.Date(2026, 6, 2, 0, 10, 0, 0, time.UTC))
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s1.ID {
		e.t.Fatal("reset at UTC midnight, which is not 04:00 in Tokyo")
	}
	e.append(s1.ID, sessions.RoleUser, "late night")
	// 2026-06-02 18:59 UTC is 03:59 on 06-03 in Tokyo: still the same day's session.
	e.clock.Set(time.Date(2026, 6, 2, 18, 59, 0, 0, time.UTC))
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s1.ID {
		e.t.Fatal("reset before 04:00 Tokyo time")
	}
	// 19:01 UTC is 04:01 in Tokyo.
	e.clock.Set(time.Date(2026, 6, 2, 19, 1, 0, 0, time.UTC))
	s2, isNew := e.resolve(dm, p)
	if !isNew || s2.ID == s1.ID {
		e.t.Fatal("no reset after 04:00 Tokyo time")
	}
	if old := e.session(s1.ID); old.ResetReason != sessions.ReasonDaily {
		e.t.Fatalf("reset reason %q, want daily", old.ResetReason)
	}
	e.clock.Advance(23 * time.Hour)
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s2.ID {
		e.t.Fatal("reset twice in one day")
	}
}

func testDailyResetAcrossDST(e *env) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		e.t.Fatal(err)
	}
	p := sessions.Policy{DailyReset: true, DailyResetHour: 2, Location: ny}
	// Spring forward: 2026-03-08 02:00 EST never happens; clocks go to 03:00 EDT.
	e.clock.Set(time.Date(2026, 3, 8, 1, 30, 0, 0, ny))
	s1, _ := e.resolve(dm, p)
	e.clock.Set(time.Date(2026, 3, 8, 1, 59, 0, 0, ny))
	if _, isNew := e.resolve(dm, p); isNew {
		e.t.Fatal("reset before the DST gap")
	}
	e.clock.Set(time.Date(2026, 3, 8, 7, 1, 0, 0, time.UTC)) // 03:01 EDT
	s2, isNew := e.resolve(dm, p)
	if !isNew || s2.ID == s1.ID {
		e.t.Fatal("no reset after the skipped hour")
	}
	e.clock.Set(time.Date(2026, 3, 8, 23, 0, 0, 0, ny))
	if _, isNew := e.resolve(dm, p); isNew {
		e.t.Fatal("second reset on the 23-hour day")
	}

	// Fall back: 2026-11-01 01:00 happens twice; reset once, at the first.
	p.DailyResetHour = 1
	e.clock.Set(time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC)) // 00:30 EDT
	s3, _ := e.resolve(dm, p)                                  // months later: a reset, whatever the hour
	e.clock.Set(time.Date(2026, 11, 1, 4, 50, 0, 0, time.UTC)) // 00:50 EDT
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s3.ID {
		e.t.Fatal("reset before the repeated hour")
	}
	e.clock.Set(time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)) // 01:30 EDT
	s4, isNew := e.resolve(dm, p)
	if !isNew {
		e.t.Fatal("no reset at the first 01:00")
	}
	e.clock.Set(time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)) // 01:30 EST, the repeat
	if s, isNew := e.resolve(dm, p); isNew || s.ID != s4.ID {
		e.t.Fatal("reset again in the repeated hour")
	}
}

func testManualReset(e *env) {
	// Reset with no session starts one.
	s1, err := e.store.Reset(e.ctx, dm)
	if err != nil || s1.Status != sessions.StatusActive {
		e.t.Fatalf("Reset of a new key: %+v %v", s1, err)
	}
	e.append(s1.ID, sessions.RoleUser, "one")
	s2, err := e.store.Reset(e.ctx, dm)
	if err != nil || s2.ID == s1.ID {
		e.t.Fatalf("Reset: %v, same id %v", err, s2.ID == s1.ID)
	}
	old := e.session(s1.ID)
	if old.Status != sessions.StatusArchived || old.ResetReason != sessions.ReasonManual {
		e.t.Fatalf("old session after manual reset: %+v", old)
	}
	if s, isNew := e.resolve(dm, sessions.Policy{}); isNew || s.ID != s2.ID {
		e.t.Fatal("resolve after reset did not find the new session")
	}
	if msgs, _ := e.store.Messages(e.ctx, s2.ID, sessions.MessagesOptions{}); len(msgs) != 0 {
		e.t.Fatalf("new session inherited %d messages", len(msgs))
	}
}

func testGroupSessions(e *env) {
	group := sessions.GroupKey("telegram", "-100500", "default")
	a, _ := e.resolve(group, sessions.Policy{})
	b, isNew := e.resolve(group, sessions.Policy{})
	if isNew || a.ID != b.ID {
		e.t.Fatal("two members of a group got different sessions")
	}
	if !a.Key.Group() || a.Key.UserID != "" {
		e.t.Fatalf("group key stored a user: %+v", a.Key)
	}
	alice, _ := e.resolve(sessions.ChatKey("telegram", "-100500", "alice", "default"), sessions.Policy{})
	bob, _ := e.resolve(sessions.ChatKey("telegram", "-100500", "bob", "default"), sessions.Policy{})
	if alice.ID == bob.ID || alice.ID == a.ID {
		e.t.Fatal("per-user sessions are shared")
	}
}

func testConcurrentResolve(e *env) {
	const n = 50
	key := sessions.ChatKey("discord", "race", "u1", "default")
	ids := make([]sessions.ID, n)
	news := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, isNew, err := e.store.Resolve(e.ctx, key, sessions.Policy{})
			ids[i], news[i], errs[i] = s.ID, isNew, err
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			e.t.Fatalf("resolve %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			e.t.Fatalf("resolve %d got session %s, resolve 0 got %s", i, ids[i], ids[0])
		}
		if news[i] {
			created++
		}
	}
	if created != 1 {
		e.t.Fatalf("%d resolves reported creating the session, want 1", created)
	}
	page, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 200, Surface: "discord"})
	if err != nil || len(page.Sessions) != 1 {
		e.t.Fatalf("sessions stored: %d (%v), want 1", len(page.Sessions), err)
	}
}

func testConcurrentResolveOfStale(e *env) {
	p := sessions.Policy{IdleTimeout: time.Minute}
	old, _ := e.resolve(dm, p)
	e.clock.Advance(time.Hour)
	const n = 20
	ids := make(chan sessions.ID, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, err := e.store.Resolve(e.ctx, dm, p)
			if err != nil {
				e.t.Error(err)
			}
			ids <- s.ID
		}()
	}
	wg.Wait()
	close(ids)
	var first sessions.ID
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first || id == old.ID {
			e.t.Fatalf("concurrent resets disagree: %s vs %s (old %s)", id, first, old.ID)
		}
	}
	page, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 200})
	if err != nil || len(page.Sessions) != 2 {
		e.t.Fatalf("after concurrent resets there are %d sessions (%v), want old + one new", len(page.Sessions), err)
	}
}
