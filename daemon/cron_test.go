package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
)

// A scheduled job's run goes through the gateway like any message; its
// reply reaches only its notify target and joins that chat's conversation,
// and the receipt records it. The CLI lists the job and its runs.
func TestCronThroughTheDaemon(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n"+
		"cron:\n  jobs:\n    - id: morning\n      schedule: \"0 9 * * *\"\n      prompt: \"morning report\"\n      notify: [\"tg:42\"]\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := adapterstest.New()
	d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	d.adapters = map[adapters.ID]adapters.Adapter{"tg": rec, "cron": d.cron}
	chat, _, err := d.sessions.Resolve(ctx, sessions.ChatKey("telegram", "42", "42", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			d.Close()
		}
	}
	defer stop()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := d.cron.RunNow(ctx, "morning"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("RunNow: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // until the scheduler's Start has run
	}
	wctx, c := context.WithTimeout(ctx, 20*time.Second)
	defer c()
	sent, err := rec.WaitSent(wctx, 1)
	if err != nil || sent[0].ChatID != "42" || !strings.Contains(sent[0].Text, "morning report") {
		t.Fatalf("the target got %+v (%v)", sent, err)
	}
	// The note joins the chat's conversation once the run's receipt is
	// recorded, which may follow the send by a moment.
	var msgs []sessions.Message
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		msgs, err = d.sessions.Messages(ctx, chat.ID, sessions.MessagesOptions{})
		if err != nil || len(msgs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0].Content, "morning report") {
		t.Fatalf("the chat's conversation: %+v %v", msgs, err)
	}
	// The report crossed the outbox once: to the chat, nothing to the
	// cron channel itself.
	var toCron, toChat int
	if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'cron'`).Scan(&toCron); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE adapter = 'tg' AND chat_id = '42'`).Scan(&toChat); err != nil {
		t.Fatal(err)
	}
	if toCron != 0 || toChat != 1 {
		t.Fatalf("outbox rows: %d to cron, %d to the chat; want 0 and 1", toCron, toChat)
	}
	stop()

	code, out, errOut := parley(t, ctx, "cron", "ls", "--config", path)
	if code != 0 || !strings.Contains(out, "morning") || !strings.Contains(out, "0 9 * * *") {
		t.Fatalf("cron ls: %d %q %q", code, out, errOut)
	}
	code, out, errOut = parley(t, ctx, "cron", "runs", "morning", "--config", path)
	if code != 0 || !strings.Contains(out, "ok") || !strings.Contains(out, "morning report") {
		t.Fatalf("cron runs: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := parley(t, ctx, "cron", "rm", "morning", "--config", path); code != 1 || !strings.Contains(errOut, "config") {
		t.Fatalf("removing a config job: %d %q", code, errOut)
	}
	code, out, errOut = parley(t, ctx, "cron", "add", "--id", "weekly", "--schedule", "@weekly", "--prompt", "week", "--config", path)
	if code != 0 || !strings.Contains(out, "added job weekly") {
		t.Fatalf("cron add: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := parley(t, ctx, "cron", "add", "--id", "bad", "--schedule", "TZ=UTC", "--prompt", "x", "--config", path); code != 1 || errOut == "" {
		t.Fatalf("a bad schedule: %d %q", code, errOut)
	}
	// Off and on again: ls shows it, and a config job is the config's.
	enabledIn := func(out, id string) string {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[0] == id {
				return f[3]
			}
		}
		return ""
	}
	for _, step := range []struct{ sub, want string }{{"disable", "false"}, {"enable", "true"}} {
		if code, out, errOut := parley(t, ctx, "cron", step.sub, "weekly", "--config", path); code != 0 || !strings.Contains(out, step.sub+"d job weekly") {
			t.Fatalf("cron %s: %d %q %q", step.sub, code, out, errOut)
		}
		if _, out, _ := parley(t, ctx, "cron", "ls", "--config", path); enabledIn(out, "weekly") != step.want {
			t.Fatalf("after cron %s, ls shows enabled %q:\n%s", step.sub, enabledIn(out, "weekly"), out)
		}
	}
	if code, _, errOut := parley(t, ctx, "cron", "disable", "morning", "--config", path); code != 1 || !strings.Contains(errOut, "enabled: false") {
		t.Fatalf("disabling a config job: %d %q", code, errOut)
	}
	if code, _, errOut := parley(t, ctx, "cron", "enable", "nosuchjob", "--config", path); code != 1 || !strings.Contains(errOut, "nosuchjob") {
		t.Fatalf("enabling a missing job: %d %q", code, errOut)
	}
	if code, out, _ := parley(t, ctx, "cron", "rm", "weekly", "--config", path); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("cron rm: %d %q", code, out)
	}
}

func TestCronConfigProblems(t *testing.T) {
	path, _ := writeConfig(t, "cron:\n  jobs:\n    - id: bad\n      schedule: \"TZ=UTC\"\n      prompt: x\n")
	code, _, errOut := parley(t, context.Background(), "memory", "reindex", "--config", path)
	if code != 1 || !strings.Contains(errOut, "parley.yaml:6: cron.jobs[0].schedule") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
}
