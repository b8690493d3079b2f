package permissions

import (
	"context"
	"fmt"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
)

// BenchmarkCheck is the permission check's cost per tool call, by the
// path a call takes: decided by the config alone (an own tool, or an MCP
// tool the manifest allows; no database read), or by a stored "always in
// this chat" answer (one indexed read), on each engine. The manifest has
// 20 pattern rules, more than most agents.
func BenchmarkCheck(b *testing.B) {
	manifest := []Rule{pinned("shell__*", Deny), r("mcp:fs", Allow)}
	for i := range 18 {
		manifest = append(manifest, r(fmt.Sprintf("srv%d__*", i), Ask))
	}
	pol, err := NewPolicy(map[string][]Rule{"a": manifest}, []ProjectRule{{Agent: "a", Rule: r("gh__search", Allow)}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range dbtest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			db := e.Open(b)
			s := newSession(b, db, "1")
			c := NewChecker(Options{Policy: pol, Store: NewStore(db)})
			if err := c.opts.Store.GrantSession(ctx, s, "gh__list", "telegram:1"); err != nil {
				b.Fatal(err)
			}
			for _, tc := range []struct{ name, tool string }{
				{"own tool", "memory_search"},
				{"manifest allows", "fs__read"},
				{"pinned deny", "shell__run"},
				{"stored session grant", "gh__list"},
			} {
				b.Run(tc.name, func(b *testing.B) {
					call := Call{Tool: tc.tool, SessionID: s, AgentID: "a", Origin: Origin{User: "telegram:1"}}
					want := tc.tool != "shell__run"
					b.ReportAllocs()
					for b.Loop() {
						if err := c.Check(ctx, call); (err == nil) != want {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
