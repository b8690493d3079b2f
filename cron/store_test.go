package cron_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/cron"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cron.Target
		err  string
	}{
		{in: "tg-main:123456", want: cron.Target{Adapter: "tg-main", ChatID: "123456"}},
		{in: "telegram.main:-100123", want: cron.Target{Adapter: "telegram.main", ChatID: "-100123"}},
		{in: " wa:123@s.whatsapp.net:7 ", want: cron.Target{Adapter: "wa", ChatID: "123@s.whatsapp.net:7"}},
		{in: "123456", err: `write "<adapter id>:<chat id>"`},
		{in: ":123", err: "both parts are needed"},
		{in: "tg-main:", err: "both parts are needed"},
		{in: "tg main:1", err: "adapter id has a space"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := cron.ParseTarget(tc.in)
			if tc.err != "" {
				if !errors.Is(err, cron.ErrInvalidTarget) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseTarget(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseTarget(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestJobValidation(t *testing.T) {
	valid := cron.Job{ID: "daily-report", Schedule: "0 9 * * *", Timezone: "UTC", AgentID: "main", Prompt: "p", Source: cron.SourceCLI}
	for _, tc := range []struct {
		name string
		edit func(*cron.Job)
		want string
	}{
		{"id with a colon", func(j *cron.Job) { j.ID = "a:b" }, `id "a:b"`},
		{"id too long", func(j *cron.Job) { j.ID = strings.Repeat("x", 65) }, "1 to 64 letters"},
		{"schedule that panics robfig", func(j *cron.Job) { j.Schedule = "TZ=UTC" }, "no schedule after it"},
		{"bad time zone", func(j *cron.Job) { j.Timezone = "Europe/Atlantis" }, "unknown time zone"},
		{"no agent", func(j *cron.Job) { j.AgentID = "" }, "agent is required"},
		{"no prompt", func(j *cron.Job) { j.Prompt = " " }, "prompt is required"},
		{"a chat command for a prompt", func(j *cron.Job) { j.Prompt = " /reset " }, "chat command /reset"},
		{"a chat command in capitals", func(j *cron.Job) { j.Prompt = "/STATUS" }, "chat command /status"},
		{"bad target", func(j *cron.Job) { j.Notify = []cron.Target{{Adapter: "tg"}} }, "notify[0]"},
		{"negative catch_up", func(j *cron.Job) { j.CatchUp = -time.Minute }, "catch_up"},
		{"negative timeout", func(j *cron.Job) { j.Timeout = -time.Minute }, "timeout"},
		{"unknown source", func(j *cron.Job) { j.Source = "api" }, "source"},
		{"tool job without owner", func(j *cron.Job) { j.Source = cron.SourceTool }, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := valid
			tc.edit(&j)
			err := j.Validate()
			if !errors.Is(err, cron.ErrInvalidJob) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalidJob saying %q", err, tc.want)
			}
		})
	}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid job: %v", err)
	}
	// A prompt that only starts with a slash, or names a command among
	// other words, is a prompt.
	for _, prompt := range []string{"/reset the counters and report", "/weather", "Run /status checks", "/status@otherbot"} {
		j := valid
		j.Prompt = prompt
		if err := j.Validate(); err != nil {
			t.Errorf("prompt %q: %v", prompt, err)
		}
	}
}

func TestStoreJobs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:30:00Z")
		owner := cron.Owner{UserID: "42", Surface: "telegram", SurfaceID: "42"}
		in := cron.Job{ID: "full", Schedule: "CRON_TZ=Europe/Berlin 0 9 * * 1-5", AgentID: "writer", Prompt: "Morning brief.",
			Notify: []cron.Target{tg("42"), {Adapter: "dc", ChatID: "9"}}, Disabled: true, CatchUp: 90 * time.Minute,
			Timeout: 3 * time.Minute, Owner: owner, Source: cron.SourceTool}
		added, err := e.store.Add(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.store.Job(ctx, "full")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, added) || !got.CreatedAt.Equal(e.clk.Now()) || got.Enabled() {
			t.Fatalf("stored job\n got %+v\nwant %+v", got, added)
		}
		if _, err := e.store.Add(ctx, in); !errors.Is(err, cron.ErrExists) {
			t.Fatalf("Add of a taken id = %v", err)
		}
		if _, err := e.store.Add(ctx, cron.Job{Schedule: "TZ=UTC", AgentID: "a", Prompt: "p"}); !errors.Is(err, cron.ErrInvalidJob) {
			t.Fatalf("Add of a bad schedule = %v", err)
		}
		gen, err := e.store.Add(ctx, cron.Job{Schedule: "@daily", AgentID: "a", Prompt: "p"})
		if err != nil || gen.ID == "" || gen.Source != cron.SourceCLI || cron.ValidateID(gen.ID) != nil {
			t.Fatalf("Add without id = %+v, %v", gen, err)
		}
		if _, err := e.store.Job(ctx, "nope"); !errors.Is(err, cron.ErrNotFound) {
			t.Fatalf("Job(nope) = %v", err)
		}
		all, err := e.store.List(ctx)
		if err != nil || len(all) != 2 {
			t.Fatalf("List = %+v, %v", all, err)
		}
		if err := e.store.Remove(ctx, gen.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Remove(ctx, gen.ID); !errors.Is(err, cron.ErrNotFound) {
			t.Fatalf("second Remove = %v", err)
		}
		if _, err := e.store.Runs(ctx, "full", cron.MaxRunsLimit+1); err == nil {
			t.Fatal("Runs accepted a limit over the maximum")
		}
	})
}

func TestSyncConfigTheConfigWins(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:30:00Z")
		cfg := func(id, prompt string) cron.Job {
			return cron.Job{ID: id, Schedule: "@daily", Timezone: "UTC", AgentID: "main", Prompt: prompt}
		}
		e.add(cron.Job{ID: "cli-job", Schedule: "@hourly"})
		e.add(cron.Job{ID: "clash", Schedule: "@hourly"})
		e.add(cron.Job{ID: "mine", Schedule: "@hourly", Source: cron.SourceTool, Owner: cron.Owner{UserID: "1", Surface: "telegram", SurfaceID: "1"}})
		if err := e.store.SyncConfig(ctx, []cron.Job{cfg("a", "A"), cfg("b", "B")}); err != nil {
			t.Fatal(err)
		}
		first, _ := e.store.Job(ctx, "a")

		e.clk.Advance(time.Hour)
		if err := e.store.SyncConfig(ctx, []cron.Job{cfg("a", "A2"), cfg("clash", "from config")}); err != nil {
			t.Fatal(err)
		}
		jobs, err := e.store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]cron.Job{}
		for _, j := range jobs {
			byID[j.ID] = j
		}
		if _, ok := byID["b"]; ok {
			t.Fatal("a config job gone from the config is still stored")
		}
		if a := byID["a"]; a.Prompt != "A2" || !a.CreatedAt.Equal(first.CreatedAt) || !a.UpdatedAt.After(first.UpdatedAt) {
			t.Fatalf("updated config job = %+v", a)
		}
		if c := byID["clash"]; c.Source != cron.SourceConfig || c.Prompt != "from config" || c.Schedule != "@daily" {
			t.Fatalf("config job over a CLI id = %+v", c)
		}
		if byID["cli-job"].Source != cron.SourceCLI || byID["mine"].Source != cron.SourceTool {
			t.Fatalf("CLI and tool jobs changed: %+v", jobs)
		}
		// Unchanged: updated_at stays, so the scheduler doesn't reschedule it.
		e.clk.Advance(time.Hour)
		if err := e.store.SyncConfig(ctx, []cron.Job{cfg("a", "A2"), cfg("clash", "from config")}); err != nil {
			t.Fatal(err)
		}
		if again, _ := e.store.Job(ctx, "a"); !again.UpdatedAt.Equal(byID["a"].UpdatedAt) {
			t.Fatalf("an unchanged config job was touched: %v -> %v", byID["a"].UpdatedAt, again.UpdatedAt)
		}
		// A bad config changes nothing.
		for _, bad := range [][]cron.Job{
			{cfg("a", "A3"), {ID: "x", Schedule: "TZ=UTC", AgentID: "main", Prompt: "p"}},
			{cfg("a", "A3"), cfg("a", "A4")},
			{cfg("", "no id")},
		} {
			if err := e.store.SyncConfig(ctx, bad); !errors.Is(err, cron.ErrInvalidJob) {
				t.Fatalf("SyncConfig(%+v) = %v", bad, err)
			}
		}
		if a, _ := e.store.Job(ctx, "a"); a.Prompt != "A2" {
			t.Fatalf("a bad config changed a job: %+v", a)
		}
		if err := e.store.Remove(ctx, "a"); !errors.Is(err, cron.ErrConfigJob) || !strings.Contains(err.Error(), "config file") {
			t.Fatalf("Remove of a config job = %v", err)
		}
	})
}

func TestReceiptsOutliveTheirJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "x", Schedule: "0 * * * *"})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		if err := e.store.Remove(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		e.reply(s, in.ChatID, "still recorded")
		if r := e.onlyRun("x"); r.Status != cron.StatusOK || r.Result != "still recorded" {
			t.Fatalf("receipt = %+v", r)
		}
	})
}

func TestLongResultIsCut(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open(t), "2025-06-02T10:59:00Z")
		e.add(cron.Job{ID: "long", Schedule: "0 * * * *"})
		s := e.start()
		e.clk.Step(t, time.Minute)
		in := e.sink.next(t)
		e.reply(s, in.ChatID, strings.Repeat("é", cron.MaxResultBytes))
		r := e.onlyRun("long")
		if len(r.Result) > cron.MaxResultBytes || !strings.Contains(r.Result, "more bytes not kept") || !strings.HasPrefix(r.Result, "éé") {
			t.Fatalf("result is %d bytes, ending %q", len(r.Result), r.Result[len(r.Result)-40:])
		}
	})
}

func TestOwnership(t *testing.T) {
	dm := cron.OwnerOf(sessions.ChatKey("telegram", "42", "42", "main"))
	for _, tc := range []struct {
		name   string
		owner  cron.Owner
		caller cron.Owner
		want   bool
	}{
		{"same user, same chat", dm, dm, true},
		{"same user, another chat on the surface", dm, cron.OwnerOf(sessions.ChatKey("telegram", "77", "42", "main")), true},
		{"another user", dm, cron.OwnerOf(sessions.ChatKey("telegram", "43", "43", "main")), false},
		{"same id on another surface", dm, cron.OwnerOf(sessions.ChatKey("discord", "42", "42", "main")), false},
		{"the user in a group", dm, cron.OwnerOf(sessions.GroupKey("telegram", "-100", "main")), false},
		{"the group itself", cron.OwnerOf(sessions.GroupKey("telegram", "-100", "main")), cron.OwnerOf(sessions.GroupKey("telegram", "-100", "other")), true},
		{"another group", cron.OwnerOf(sessions.GroupKey("telegram", "-100", "main")), cron.OwnerOf(sessions.GroupKey("telegram", "-200", "main")), false},
		{"no owner", cron.Owner{}, cron.Owner{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.owner.Owns(tc.caller); got != tc.want {
				t.Fatalf("%v owns %v = %v, want %v", tc.owner, tc.caller, got, tc.want)
			}
		})
	}
}
