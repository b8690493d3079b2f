package memory

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/sessions"
)

func TestScopeOf(t *testing.T) {
	at := time.UnixMilli(1700000000000)
	group := sessions.GroupKey("telegram", "-100500", "default")
	dm := sessions.ChatKey("telegram", "42", "42", "default")
	for _, tc := range []struct {
		name string
		key  sessions.Key
		want Scope
	}{
		{"direct chat", dm, Scope{Agent: "default", User: "user:telegram:42"}},
		{"same user id on another surface", sessions.ChatKey("discord", "42", "42", "default"), Scope{Agent: "default", User: "user:discord:42"}},
		{"per-user session inside a group chat", sessions.ChatKey("telegram", "-100500", "alice", "default"), Scope{Agent: "default", User: "user:telegram:alice"}},
		{"group", group, Scope{Agent: "default", User: "group:telegram:-100500"}},
		{"workspace", sessions.Key{UserID: "u", Surface: "cli", SurfaceID: "chat", AgentID: "a", WorkspaceID: "w"}, Scope{Agent: "a", User: "user:cli:u", Workspace: "w"}},
		{"cron runs share the job's scope", sessions.CronKey("nightly", at, "default"), Scope{Agent: "default", User: "group:cron:nightly"}},
		{"cron job id with a colon", sessions.CronKey("team:digest", at, "default"), Scope{Agent: "default", User: "group:cron:team:digest"}},
		{"webhook deliveries share the hook's scope", sessions.WebhookKey("github", at, "default"), Scope{Agent: "default", User: "group:webhook:github"}},
		{"subagent of a direct chat", sessions.SubagentKey(dm, at, "ab12", "helper"), Scope{Agent: "helper", User: "user:telegram:42"}},
		{"subagent of a group", sessions.SubagentKey(group, at, "ab12", "default"), Scope{Agent: "default", User: "group:telegram:-100500"}},
		{"subagent of a subagent", sessions.SubagentKey(sessions.SubagentKey(group, at, "x", "default"), at, "y", "default"), Scope{Agent: "default", User: "group:telegram:-100500"}},
		{"subagent of a cron run", sessions.SubagentKey(sessions.CronKey("nightly", at, "default"), at, "z", "default"), Scope{Agent: "default", User: "group:cron:nightly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScopeOf(tc.key); got != tc.want {
				t.Fatalf("ScopeOf(%+v) = %+v, want %+v", tc.key, got, tc.want)
			}
		})
	}
}

// A user id that spells a group's scope still lands in a user scope.
func TestScopeKindsAreDisjoint(t *testing.T) {
	g := ScopeOf(sessions.GroupKey("telegram", "-1", "default"))
	u := ScopeOf(sessions.ChatKey("telegram", "-1", "group:telegram:-1", "default"))
	if g == u || g.key() == u.key() {
		t.Fatalf("group %+v and user %+v share a scope", g, u)
	}
}

func TestScopeKey(t *testing.T) {
	a := Scope{Agent: "a", User: "user:x:1"}
	if k := a.key(); len(k) != 32 || strings.Trim(k, "abcdefghijklmnop") != "" {
		t.Fatalf("key %q is not 32 letters a-p", k)
	}
	if a.key() != (Scope{Agent: "a", User: "user:x:1"}).key() {
		t.Fatal("key is not deterministic")
	}
	// The separator keeps field boundaries: moving text across them changes the key.
	for _, other := range []Scope{{Agent: "a", User: "user:x:1", Workspace: "w"}, {Agent: "au", User: "ser:x:1"}, {Agent: "b", User: "user:x:1"}} {
		if other.key() == a.key() {
			t.Fatalf("%+v and %+v share a key", a, other)
		}
	}
}

func TestScopeValidate(t *testing.T) {
	for _, s := range []Scope{{User: "user:x:1"}, {Agent: "a"}, {Agent: "a", User: "bad\x00"}, {Agent: "a", User: "u", Workspace: "\xff"}} {
		if err := s.Validate(); !errors.Is(err, ErrInvalidScope) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidScope", s, err)
		}
	}
	if err := alice.Validate(); err != nil {
		t.Fatal(err)
	}
}
