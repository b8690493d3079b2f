package cron_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// toolSet registers the tools (so their schemas compile) and calls them as
// the agent loop would.
type toolSet struct {
	t     *testing.T
	tools map[string]tools.Tool
}

func newToolSet(t *testing.T, s *cron.Scheduler, opts cron.ToolOptions) toolSet {
	reg := tools.NewRegistry()
	ts := toolSet{t: t, tools: map[string]tools.Tool{}}
	for _, tool := range s.Tools(opts) {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
		ts.tools[tool.Name] = tool
	}
	return ts
}

func (ts toolSet) call(name string, key sessions.Key, args any) (string, error) {
	ts.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		ts.t.Fatal(err)
	}
	return ts.tools[name].Run(context.Background(), tools.Call{SessionID: "s", Key: key, ID: "call-1", Arguments: raw})
}

// chatTarget is the daemon's TargetFor in these tests: telegram sessions
// talk through the adapter "tg-main".
func chatTarget(_ context.Context, k sessions.Key) (cron.Target, bool) {
	if k.Surface != "telegram" {
		return cron.Target{}, false
	}
	return cron.Target{Adapter: "tg-main", ChatID: k.SurfaceID}, true
}

func TestToolCreatedJobFlow(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T06:30:00Z")
		s := e.start()
		ts := newToolSet(t, s.Scheduler, cron.ToolOptions{TargetFor: chatTarget})
		alice := sessions.ChatKey("telegram", "1001", "alice", "main")
		bob := sessions.ChatKey("telegram", "2002", "bob", "main")

		mark := e.clk.Mark()
		out, err := ts.call(cron.CreateToolName, alice, map[string]any{
			"schedule": "0 9 * * *", "prompt": "Tell me the weather in Berlin.", "timezone": "Europe/Berlin"})
		if err != nil {
			t.Fatal(err)
		}
		e.clk.WaitIdle(t, mark) // the tool asked the scheduler to reload
		if !strings.Contains(out, "first run Mon 2025-06-02 09:00 CEST") || !strings.Contains(out, "sent to this chat") {
			t.Fatalf("create said %q", out)
		}
		jobs, err := e.store.Owned(ctx, cron.OwnerOf(alice))
		if err != nil || len(jobs) != 1 {
			t.Fatalf("alice's jobs = %+v, %v", jobs, err)
		}
		j := jobs[0]
		if j.Source != cron.SourceTool || j.AgentID != "main" || j.Owner != cron.OwnerOf(alice) ||
			len(j.Notify) != 1 || j.Notify[0] != (cron.Target{Adapter: "tg-main", ChatID: "1001"}) || !strings.Contains(out, j.ID) {
			t.Fatalf("created job = %+v", j)
		}

		out, err = ts.call(cron.ListToolName, alice, map[string]any{})
		if err != nil || !strings.Contains(out, j.ID) || !strings.Contains(out, "0 9 * * * (Europe/Berlin)") ||
			!strings.Contains(out, "next run Mon 2025-06-02 09:00 CEST") || !strings.Contains(out, "tg-main:1001") {
			t.Fatalf("alice's list = %q, %v", out, err)
		}
		if out, err := ts.call(cron.ListToolName, bob, map[string]any{}); err != nil || out != "No scheduled tasks." {
			t.Fatalf("bob's list = %q, %v", out, err)
		}

		// 09:00 Berlin is 07:00 UTC: it fires and the creator is told.
		e.clk.Step(t, 30*time.Minute)
		in := e.sink.next(t)
		if in.AgentID != "main" || in.Text != "Tell me the weather in Berlin." {
			t.Fatalf("fire = %+v", in)
		}
		e.reply(s, in.ChatID, "Sunny, 24°C.")
		notes := e.notes.all()
		if len(notes) != 1 || notes[0].Target != (cron.Target{Adapter: "tg-main", ChatID: "1001"}) || notes[0].Text != "Sunny, 24°C." {
			t.Fatalf("notices = %+v", notes)
		}
		out, _ = ts.call(cron.ListToolName, alice, map[string]any{})
		if !strings.Contains(out, "last run: 2025-06-02 09:00, ok") {
			t.Fatalf("list after a run = %q", out)
		}

		// Bob can't delete it, and isn't told it exists.
		if _, err := ts.call(cron.DeleteToolName, bob, map[string]any{"id": j.ID}); err == nil || !strings.Contains(err.Error(), "you have no scheduled task") {
			t.Fatalf("bob's delete = %v", err)
		}
		if _, err := e.store.Job(ctx, j.ID); err != nil {
			t.Fatalf("after bob's delete: %v", err)
		}
		// Alice can, and it fires no more.
		mark = e.clk.Mark()
		if out, err := ts.call(cron.DeleteToolName, alice, map[string]any{"id": j.ID}); err != nil || !strings.Contains(out, "deleted") {
			t.Fatalf("alice's delete = %q, %v", out, err)
		}
		e.clk.WaitIdle(t, mark)
		e.clk.Step(t, 24*time.Hour)
		e.sink.none(t)
		if out, _ := ts.call(cron.ListToolName, alice, map[string]any{}); out != "No scheduled tasks." {
			t.Fatalf("alice's list after delete = %q", out)
		}
	})
}

func TestToolCreateRefusals(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T06:30:00Z")
		s := e.start()
		ts := newToolSet(t, s.Scheduler, cron.ToolOptions{TargetFor: chatTarget, MaxJobs: 2})
		alice := sessions.ChatKey("telegram", "1001", "alice", "main")
		for _, tc := range []struct {
			name string
			key  sessions.Key
			args map[string]any
			want string
		}{
			{"robfig's panic case", alice, map[string]any{"schedule": "TZ=UTC", "prompt": "p"}, "no schedule after it"},
			{"bad zone", alice, map[string]any{"schedule": "0 9 * * *", "timezone": "Moon/Base", "prompt": "p"}, "unknown time zone"},
			{"too often", alice, map[string]any{"schedule": "* * * * *", "prompt": "p"}, "at most once every 5m0s"},
			{"someone else's chat", alice, map[string]any{"schedule": "@daily", "prompt": "p", "notify": []string{"tg-main:666"}}, "not allowed"},
			{"bad target", alice, map[string]any{"schedule": "@daily", "prompt": "p", "notify": []string{"nochat"}}, "adapter id"},
			{"from a cron run", sessions.CronKey("j", time.Now(), "main"), map[string]any{"schedule": "@daily", "prompt": "p"}, "not from a cron session"},
			{"no prompt", alice, map[string]any{"schedule": "@daily"}, "prompt is required"},
			{"unknown field", alice, map[string]any{"schedule": "@daily", "prompt": "p", "when": "now"}, "unknown field"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := ts.call(cron.CreateToolName, tc.key, tc.args)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("create = %v, want an error saying %q", err, tc.want)
				}
			})
		}
		// Record-only jobs, and the cap per owner.
		out, err := ts.call(cron.CreateToolName, alice, map[string]any{"schedule": "@daily", "prompt": "p", "notify": []string{}})
		if err != nil || !strings.Contains(out, "not sent to any chat") {
			t.Fatalf("record-only create = %q, %v", out, err)
		}
		if _, err := ts.call(cron.CreateToolName, alice, map[string]any{"schedule": "@daily", "prompt": "p2", "notify": []string{"tg-main:1001"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.call(cron.CreateToolName, alice, map[string]any{"schedule": "@daily", "prompt": "p3"}); err == nil || !strings.Contains(err.Error(), "the most allowed") {
			t.Fatalf("third create = %v", err)
		}
		// The CLI session has no chat to notify: the job records only.
		cli := sessions.CLIKey("me", "main")
		if out, err := ts.call(cron.CreateToolName, cli, map[string]any{"schedule": "@daily", "prompt": "p"}); err != nil || !strings.Contains(out, "not sent to any chat") {
			t.Fatalf("create from the CLI = %q, %v", out, err)
		}
	})
}

func TestToolMayNotifyOtherChats(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T06:30:00Z")
		s := e.start()
		ts := newToolSet(t, s.Scheduler, cron.ToolOptions{TargetFor: chatTarget,
			MayNotify: func(_ context.Context, _ sessions.Key, t cron.Target) bool { return t.Adapter == "team" }})
		group := sessions.GroupKey("telegram", "-100", "main")
		if _, err := ts.call(cron.CreateToolName, group, map[string]any{"schedule": "@daily", "prompt": "p", "notify": []string{"team:general", "tg-main:-100"}}); err != nil {
			t.Fatal(err)
		}
		jobs, err := e.store.Owned(ctx, cron.OwnerOf(group))
		if err != nil || len(jobs) != 1 || len(jobs[0].Notify) != 2 || jobs[0].Owner.UserID != "" {
			t.Fatalf("group's jobs = %+v, %v", jobs, err)
		}
		// Anyone in the group manages the group's jobs; no one from outside.
		if _, err := ts.call(cron.DeleteToolName, sessions.ChatKey("telegram", "5", "5", "main"), map[string]any{"id": jobs[0].ID}); err == nil {
			t.Fatal("a user outside the group deleted the group's job")
		}
		if _, err := ts.call(cron.DeleteToolName, sessions.GroupKey("telegram", "-100", "main"), map[string]any{"id": jobs[0].ID}); err != nil {
			t.Fatal(err)
		}
	})
}
