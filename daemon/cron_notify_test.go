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
