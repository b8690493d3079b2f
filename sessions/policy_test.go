package sessions

import (
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestLastDailyReset(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	tokyo := mustZone(t, "Asia/Tokyo")
	berlin := mustZone(t, "Europe/Berlin")
	troll := mustZone(t, "Antarctica/Troll")
	chatham := mustZone(t, "Pacific/Chatham")
	cases := []struct {
		name string
		hour int
		loc  *time.Location
		now  time.Time
		want time.Time
	}{
		{"later today", 4, tokyo, time.Date(2026, 3, 1, 10, 0, 0, 0, tokyo), time.Date(2026, 3, 1, 4, 0, 0, 0, tokyo)},
		{"before the hour: yesterday", 4, tokyo, time.Date(2026, 3, 1, 3, 59, 0, 0, tokyo), time.Date(2026, 2, 28, 4, 0, 0, 0, tokyo)},
		{"exactly at the hour", 4, tokyo, time.Date(2026, 3, 1, 4, 0, 0, 0, tokyo), time.Date(2026, 3, 1, 4, 0, 0, 0, tokyo)},
		{"midnight across a month", 0, tokyo, time.Date(2026, 3, 1, 0, 30, 0, 0, tokyo), time.Date(2026, 3, 1, 0, 0, 0, 0, tokyo)},
		{"new year", 23, tokyo, time.Date(2027, 1, 1, 1, 0, 0, 0, tokyo), time.Date(2026, 12, 31, 23, 0, 0, 0, tokyo)},
		// 2026-03-08 02:00 EST does not exist in New York: the clocks jump to 03:00 EDT.
		{"spring forward: skipped hour resets after the gap", 2, ny, time.Date(2026, 3, 8, 3, 30, 0, 0, ny),
			time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)},
		{"spring forward: before the gap it is still yesterday's", 2, ny, time.Date(2026, 3, 8, 1, 59, 0, 0, ny),
			time.Date(2026, 3, 7, 2, 0, 0, 0, ny)},
		// 2026-11-01 01:00 happens twice in New York; the first one counts.
		// East of UTC, time.Date picks the second 02:00 of 2026-10-25 in Berlin; the first is 00:00 UTC.
		{"fall back east of UTC: first instance", 2, berlin, time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),
			time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC)},
		// Troll jumps from 01:00 UTC+0 to 03:00 UTC+2 on 2026-03-29: a two-hour gap.
		{"two-hour gap", 2, troll, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC),
			time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},
		// Chatham jumps from 02:45 to 03:45 on 2026-09-27: a gap on the quarter hour.
		{"quarter-hour gap", 3, chatham, time.Date(2026, 9, 27, 3, 50, 0, 0, chatham),
			time.Date(2026, 9, 27, 3, 45, 0, 0, chatham)},
		{"fall back: repeated hour resets at its first instance", 1, ny, time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC),
			time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{DailyReset: true, DailyResetHour: tc.hour, Location: tc.loc}
			if got := p.lastDailyReset(tc.now); !got.Equal(tc.want) {
				t.Fatalf("lastDailyReset(%v) = %v, want %v", tc.now, got.In(tc.loc), tc.want.In(tc.loc))
			}
		})
	}
}

func TestPolicyStale(t *testing.T) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		p          Policy
		lastActive time.Time
		now        time.Time
		want       string
	}{
		{"off", Policy{}, base, base.Add(1000 * time.Hour), ""},
		{"idle under", Policy{IdleTimeout: 30 * time.Minute}, base, base.Add(30 * time.Minute), ""},
		{"idle over", Policy{IdleTimeout: 30 * time.Minute}, base, base.Add(30*time.Minute + time.Millisecond), ReasonIdle},
		{"daily same day", Policy{DailyReset: true, DailyResetHour: 4}, base, base.Add(11 * time.Hour), ""},
		{"daily crossed", Policy{DailyReset: true, DailyResetHour: 4}, base, base.Add(16 * time.Hour), ReasonDaily},
		{"idle wins when both", Policy{IdleTimeout: time.Hour, DailyReset: true, DailyResetHour: 4}, base, base.Add(48 * time.Hour), ReasonIdle},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, stale := tc.p.Stale(tc.lastActive, tc.now)
			if got != tc.want || stale != (tc.want != "") {
				t.Fatalf("Stale = %q, %v; want %q", got, stale, tc.want)
			}
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"plain /4 rounds up", "hello", 2},
		{"plain exact", "abcdefgh", 2},
		{"json /3", `{"a": 1, "b": [1, 2]}`, 7},
		{"invalid json is plain", `{"a": 1`, 2},
		{"code fence /6", "see\n```go\nx := 1\n```\n", 4},
		{"non-ascii counts bytes", "日本語", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EstimateTokens(tc.in); got != tc.want {
				t.Fatalf("EstimateTokens(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestKeyStrings(t *testing.T) {
	at := time.UnixMilli(1700000000000)
	parent := ChatKey("telegram", "42", "42", "default")
	cases := []struct {
		key  Key
		want string
		kind string
	}{
		{parent, "telegram:42", "channel"},
		{GroupKey("discord", "987", "default"), "discord:987", "channel"},
		{ChatKey("whatsapp", "4915@s.whatsapp.net", "4915@s.whatsapp.net", "default"), "whatsapp:4915@s.whatsapp.net", "channel"},
		{CLIKey("local", "default"), "cli:chat", "cli"},
		{MCPKey("default", "default"), "mcp:default", "mcp"},
		{CronKey("nightly", at, "default"), "cron:nightly:1700000000000", "cron"},
		{WebhookKey("ci", at, "default"), "webhook:ci:1700000000000", "webhook"},
		{SubagentKey(parent, at, "ab12", "default"), "telegram:42:subagent:1700000000000-ab12", "subagent"},
	}
	for _, tc := range cases {
		if got := tc.key.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
		if got := tc.key.Kind(); got != tc.kind {
			t.Errorf("%s Kind() = %q, want %q", tc.want, got, tc.kind)
		}
	}
	if !GroupKey("discord", "1", "a").Group() || ChatKey("telegram", "1", "1", "a").Group() {
		t.Error("Group() is wrong")
	}
	if err := (Key{Surface: "telegram"}).Validate(); err == nil {
		t.Error("a key without surface_id and agent_id validated")
	}
}
