package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/parleyd/parley/events"
	"github.com/parleyd/parley/sessions"
)

func testPagination(e *env) {
	const total = 205
	var ids []sessions.ID
	for i := range total {
		e.clock.Advance(time.Millisecond)
		s, _ := e.resolve(sessions.ChatKey("telegram", fmt.Sprint(i), fmt.Sprint(i), "default"), sessions.Policy{})
		ids = append(ids, s.ID)
	}
	for _, bad := range []int{0, -1, 201} {
		if _, err := e.store.List(e.ctx, sessions.ListOptions{Limit: bad}); !errors.Is(err, sessions.ErrBadLimit) {
			e.t.Errorf("List(limit %d) = %v, want ErrBadLimit", bad, err)
		}
	}
	one, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 1})
	if err != nil || len(one.Sessions) != 1 || one.Sessions[0].ID != ids[total-1] || one.Next == "" {
		e.t.Fatalf("limit 1: %d sessions, next %q, %v", len(one.Sessions), one.Next, err)
	}
	full, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 200})
	if err != nil || len(full.Sessions) != 200 || full.Next == "" {
		e.t.Fatalf("limit 200: %d sessions, next %q, %v", len(full.Sessions), full.Next, err)
	}
	rest, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 200, Cursor: full.Next})
	if err != nil || len(rest.Sessions) != 5 || rest.Next != "" {
		e.t.Fatalf("last page: %d sessions, next %q, %v", len(rest.Sessions), rest.Next, err)
	}
	// Walking with an odd page size visits every session once, newest first.
	seen := 0
	cursor := ""
	for page := 0; ; page++ {
		p, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 7, Cursor: cursor})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, s := range p.Sessions {
			if want := ids[total-1-seen]; s.ID != want {
				e.t.Fatalf("item %d is %s, want %s", seen, s.ID, want)
			}
			seen++
		}
		if p.Next == "" {
			break
		}
		if page > total {
			e.t.Fatal("pagination does not end")
		}
		cursor = p.Next
	}
	if seen != total {
		e.t.Fatalf("walked %d sessions, want %d", seen, total)
	}
	exact, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 5, Cursor: full.Next})
	if err != nil || len(exact.Sessions) != 5 || exact.Next != "" {
		e.t.Fatalf("a page that ends exactly at the last item: %d, next %q, %v", len(exact.Sessions), exact.Next, err)
	}
	for _, bad := range []string{"garbage!", "Zm9v", base64.RawURLEncoding.EncodeToString([]byte("s1:not-a-uuid")), "'; DROP TABLE sessions; --"} {
		if _, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 10, Cursor: bad}); !errors.Is(err, sessions.ErrBadCursor) {
			e.t.Errorf("List(cursor %q) = %v, want ErrBadCursor", bad, err)
		}
	}
}

func testListFilters(e *env) {
	tg, _ := e.resolve(sessions.ChatKey("telegram", "1", "1", "default"), sessions.Policy{})
	e.resolve(sessions.GroupKey("discord", "2", "default"), sessions.Policy{})
	e.resolve(sessions.ChatKey("telegram", "3", "3", "family"), sessions.Policy{})
	if _, err := e.store.Reset(e.ctx, tg.Key); err != nil {
		e.t.Fatal(err)
	}
	count := func(o sessions.ListOptions) int {
		o.Limit = 200
		p, err := e.store.List(e.ctx, o)
		if err != nil {
			e.t.Fatal(err)
		}
		return len(p.Sessions)
	}
	cases := []struct {
		name string
		opts sessions.ListOptions
		want int
	}{
		{"all", sessions.ListOptions{}, 4},
		{"active", sessions.ListOptions{Status: sessions.StatusActive}, 3},
		{"archived", sessions.ListOptions{Status: sessions.StatusArchived}, 1},
		{"surface", sessions.ListOptions{Surface: "telegram"}, 3},
		{"agent", sessions.ListOptions{AgentID: "family"}, 1},
		{"combined", sessions.ListOptions{Surface: "telegram", AgentID: "default", Status: sessions.StatusActive}, 1},
		{"no match", sessions.ListOptions{Surface: "whatsapp"}, 0},
	}
	for _, tc := range cases {
		if got := count(tc.opts); got != tc.want {
			e.t.Errorf("%s: %d sessions, want %d", tc.name, got, tc.want)
		}
	}
	if _, err := e.store.List(e.ctx, sessions.ListOptions{Limit: 10, Status: "deleted"}); err == nil {
		e.t.Error("an unknown status filter was accepted")
	}
}

func testRenameAndDelete(e *env) {
	s, _ := e.resolve(dm, sessions.Policy{})
	e.append(s.ID, sessions.RoleUser, "hi")
	if err := e.store.Rename(e.ctx, s.ID, "Family plans"); err != nil {
		e.t.Fatal(err)
	}
	if got := e.session(s.ID); got.Title != "Family plans" {
		e.t.Fatalf("title %q", got.Title)
	}
	unknown := sessions.ID("0190c7a0-0000-7000-8000-000000000000")
	if err := e.store.Rename(e.ctx, unknown, "x"); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Rename(unknown) = %v", err)
	}
	if err := e.store.Delete(e.ctx, s.ID); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Session(e.ctx, s.ID); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Session after delete: %v", err)
	}
	if _, err := e.store.Messages(e.ctx, s.ID, sessions.MessagesOptions{Archived: true, Hidden: true}); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("Messages after delete: %v", err)
	}
	var left int
	if err := e.db.Reader().QueryRowContext(e.ctx, `SELECT COUNT(*) FROM messages WHERE session_id = $1`, s.ID).Scan(&left); err != nil || left != 0 {
		e.t.Fatalf("%d messages outlived their session (%v)", left, err)
	}
	if err := e.store.Delete(e.ctx, s.ID); !errors.Is(err, sessions.ErrNotFound) {
		e.t.Fatalf("second Delete = %v", err)
	}
	if _, isNew := e.resolve(dm, sessions.Policy{}); !isNew {
		e.t.Fatal("resolve after delete did not start a new session")
	}
}

func testEvents(e *env) {
	sub := e.bus.Subscribe()
	defer sub.Close()
	p := sessions.Policy{IdleTimeout: time.Minute}
	s1, _ := e.resolve(dm, p)
	m := e.append(s1.ID, sessions.RoleUser, "hi")
	e.clock.Advance(time.Hour)
	s2, _ := e.resolve(dm, p)
	s3, err := e.store.Reset(e.ctx, dm)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.Delete(e.ctx, s3.ID); err != nil {
		e.t.Fatal(err)
	}
	want := []events.Type{sessions.EventSessionCreated, sessions.EventMessageAppended, sessions.EventSessionReset,
		sessions.EventSessionReset, sessions.EventSessionDeleted}
	for i, typ := range want {
		if sub.Pending() == 0 {
			e.t.Fatalf("event %d (%s) missing", i, typ)
		}
		ev, err := sub.Next(e.ctx)
		if err != nil || ev.Type != typ {
			e.t.Fatalf("event %d: %s %v, want %s", i, ev.Type, err, typ)
		}
		switch d := ev.Data.(type) {
		case sessions.SessionCreated:
			if d.Session.ID != s1.ID {
				e.t.Errorf("created: %s", d.Session.ID)
			}
		case sessions.MessageAppended:
			if d.Message.ID != m.ID || ev.SessionID != string(s1.ID) {
				e.t.Errorf("appended: %+v", d.Message)
			}
		case sessions.SessionReset:
			if i == 2 && (d.Old.ID != s1.ID || d.New.ID != s2.ID || d.Reason != sessions.ReasonIdle || d.Old.Status != sessions.StatusArchived) {
				e.t.Errorf("idle reset event: %+v", d)
			}
			if i == 3 && (d.Old.ID != s2.ID || d.New.ID != s3.ID || d.Reason != sessions.ReasonManual) {
				e.t.Errorf("manual reset event: %+v", d)
			}
		case sessions.SessionDeleted:
			if d.ID != s3.ID || d.Key != dm {
				e.t.Errorf("deleted: %+v", d)
			}
		default:
			e.t.Errorf("event %s carries %T", ev.Type, ev.Data)
		}
	}
	if sub.Pending() != 0 {
		e.t.Fatalf("%d unexpected extra events", sub.Pending())
	}
}
