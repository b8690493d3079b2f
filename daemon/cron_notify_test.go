package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
)

// A cron run's receipt says whether its result reached the notify target:
// an ok run whose note keeps failing shows it (retrying, with the error),
// and shows it delivered once it is.
func TestCronReceiptShowsTheNotifyDelivery(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		path := writeConfigAt(t, dbURL, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n"+
			"cron:\n  jobs:\n    - id: tick\n      schedule: \"0 9 * * *\"\n      prompt: \"tick report\"\n      notify: [\"tg:42\"]\n")
		rec := adapterstest.New()
		// The receipt cuts the error at 60 characters, inside the Cyrillic: cut
		// at 60 bytes, it split a character.
		rec.FailNext(1000, errors.New("403 Forbidden: bot was blocked by the user — пользователь заблокировал бота"))
		d, _, stop := testDaemonAt(t, path, func(d *Daemon) map[adapters.ID]adapters.Adapter {
			return map[adapters.ID]adapters.Adapter{"tg": rec, "cron": d.cron}
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
		receipt := func(want string) string {
			t.Helper()
			var out string
			deadline := time.Now().Add(20 * time.Second)
			for {
				code, o, errOut := parley(t, ctx, "cron", "runs", "tick", "--config", path)
				if code != 0 {
					t.Fatalf("cron runs: %d %q %q", code, o, errOut)
				}
				if out = o; strings.Contains(out, want) || time.Now().After(deadline) {
					return out
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		out := receipt("retrying (")
		if !strings.Contains(out, "NOTIFY") || !strings.Contains(out, " ok ") || !strings.Contains(out, "retrying (") ||
			!strings.Contains(out, "403 Forbidden") {
			t.Fatalf("the receipt of an ok run whose note fails:\n%s", out)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("the receipt cuts the note's error mid-character:\n%q", out)
		}
		rec.FailNext(0, nil)
		d.sender.Wake()
		if out := receipt("delivered"); !strings.Contains(out, "delivered") {
			t.Fatalf("the receipt once the note is sent:\n%s", out)
		}
	})
}

// A notify target naming no channel is refused by cron add; one that
// names a channel no longer running (its job was stored before the
// channel went) leaves a receipt that says why nothing was sent, whole
// with --full.
func TestCronUnknownNotifyTargets(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		path := writeConfigAt(t, dbURL, "gateway:\n  debounce: 0s\nadapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n")
		if code, out, errOut := parley(t, ctx, "migrate", "--config", path); code != 0 {
			t.Fatalf("migrate: %d %q %q", code, out, errOut)
		}
		code, out, errOut := parley(t, ctx, "cron", "add", "--id", "water", "--schedule", "@every 2h", "--prompt", "drink", "--notify", "tg-main:42", "--config", path)
		if code != 2 || !strings.Contains(errOut, `"tg-main"`) || !strings.Contains(errOut, "use one of: tg") {
			t.Fatalf("cron add to a channel that isn't configured: %d %q %q", code, out, errOut)
		}
		if code, _, errOut := parley(t, ctx, "cron", "add", "--id", "water", "--schedule", "@every 2h", "--prompt", "drink", "--notify", "tg:42", "--config", path); code != 0 {
			t.Fatalf("cron add to a configured channel: %d %q", code, errOut)
		}

		d, _, stop := testDaemonAt(t, path, func(d *Daemon) map[adapters.ID]adapters.Adapter {
			return map[adapters.ID]adapters.Adapter{"cron": d.cron} // tg is configured but not running
		})
		defer stop()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := d.cron.RunNow(ctx, "water"); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("RunNow: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var o string
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			code, out, errOut := parley(t, ctx, "cron", "runs", "water", "--config", path)
			if code != 0 {
				t.Fatalf("cron runs: %d %q %q", code, out, errOut)
			}
			// The receipt says "not queued" from the run's end, and why
			// once the note's attempt has failed.
			if o = out; strings.Contains(o, "not queued: ") || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(o, "not queued: ") || !strings.Contains(o, "no running channel is called tg") {
			t.Fatalf("the receipt of a run whose target has no running channel doesn't say why:\n%s", o)
		}
		code, full, errOut := parley(t, ctx, "cron", "runs", "water", "--full", "--config", path)
		if code != 0 || !strings.Contains(full, "notify    not queued: ") || !strings.Contains(full, "result    ") ||
			!strings.Contains(full, "scheduled ") || !strings.Contains(full, "drink") {
			t.Fatalf("cron runs --full: %d %q\n%s", code, errOut, full)
		}
	})
}
