package cron

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseScheduleAccepts(t *testing.T) {
	from := "2025-06-02T08:00:00Z" // a Monday
	for _, tc := range []struct {
		name, spec, tz string
		want           []string // the next fire times from `from`, in UTC
	}{
		{"five fields", "0 9 * * 1-5", "UTC", []string{"2025-06-02T09:00:00Z", "2025-06-03T09:00:00Z"}},
		{"six fields with seconds", "30 0 9 * * *", "UTC", []string{"2025-06-02T09:00:30Z", "2025-06-03T09:00:30Z"}},
		{"seconds every 15", "*/15 * * * * *", "UTC", []string{"2025-06-02T08:00:15Z", "2025-06-02T08:00:30Z"}},
		{"descriptor daily", "@daily", "UTC", []string{"2025-06-03T00:00:00Z", "2025-06-04T00:00:00Z"}},
		{"descriptor hourly", "@hourly", "UTC", []string{"2025-06-02T09:00:00Z", "2025-06-02T10:00:00Z"}},
		{"descriptor every", "@every 90m", "", []string{"2025-06-02T09:30:00Z", "2025-06-02T11:00:00Z"}},
		{"CRON_TZ prefix", "CRON_TZ=Europe/Berlin 0 9 * * *", "", []string{"2025-06-03T07:00:00Z", "2025-06-04T07:00:00Z"}},
		{"TZ prefix", "TZ=America/New_York 0 9 * * *", "", []string{"2025-06-02T13:00:00Z", "2025-06-03T13:00:00Z"}},
		{"timezone key", "0 9 * * *", "Asia/Tokyo", []string{"2025-06-03T00:00:00Z", "2025-06-04T00:00:00Z"}},
		{"prefix and the same key", "CRON_TZ=Asia/Tokyo 0 9 * * *", "Asia/Tokyo", []string{"2025-06-03T00:00:00Z", "2025-06-04T00:00:00Z"}},
		{"descriptor in a zone", "CRON_TZ=Europe/Berlin @daily", "", []string{"2025-06-02T22:00:00Z", "2025-06-03T22:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec, tc.tz)
			if err != nil {
				t.Fatalf("ParseSchedule(%q, %q): %v", tc.spec, tc.tz, err)
			}
			at := mustTime(t, from)
			for i, w := range tc.want {
				at = s.Next(at)
				if !at.Equal(mustTime(t, w)) {
					t.Fatalf("fire %d = %s, want %s", i+1, at.UTC().Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestParseScheduleRejects(t *testing.T) {
	for _, tc := range []struct {
		name, spec, tz string
		want           string // part of the error
	}{
		{"empty", "  ", "", "the schedule is empty"},
		{"TZ with no schedule (robfig panics)", "TZ=UTC", "", "has a time zone but no schedule after it"},
		{"CRON_TZ with no schedule", "CRON_TZ=Europe/Berlin", "", "no schedule after it"},
		{"TZ with no schedule but spaces", "TZ=UTC   ", "", "no schedule after it"},
		{"empty zone", "TZ= 0 * * * *", "", "names no time zone"},
		{"bad zone in prefix", "CRON_TZ=Mars/Olympus 0 9 * * *", "", `unknown time zone "Mars/Olympus"`},
		{"bad zone key", "0 9 * * *", "Nowhere/Town", `unknown time zone "Nowhere/Town"`},
		{"local by name", "0 9 * * *", "Local", "leave it out for the server's local time"},
		{"two zones", "CRON_TZ=Europe/Berlin 0 9 * * *", "UTC", "give the zone once"},
		{"minute out of range", "61 * * * *", "UTC", "above maximum"},
		{"too few fields", "* * *", "UTC", "expected 5 to 6 fields"},
		{"too many fields", "1 2 3 4 5 6 7", "UTC", "expected 5 to 6 fields"},
		{"word for a field", "0 nine * * *", "UTC", "write 5 fields"},
		{"unknown descriptor", "@fortnightly", "UTC", "unrecognized descriptor"},
		{"every without duration", "@every", "UTC", "unrecognized descriptor"},
		{"never fires", "0 0 30 2 *", "UTC", "never fires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSchedule(tc.spec, tc.tz)
			if err == nil {
				t.Fatalf("ParseSchedule(%q, %q) = nil error", tc.spec, tc.tz)
			}
			if !errors.Is(err, ErrInvalidSchedule) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseSchedule(%q, %q) = %v, want ErrInvalidSchedule saying %q", tc.spec, tc.tz, err, tc.want)
			}
		})
	}
}

// The guard matters: robfig itself panics on a zone with nothing after it,
// and safeParse turns any panic into an error.
func TestRobfigPanicIsGuarded(t *testing.T) {
	panicked := func() (p any) {
		defer func() { p = recover() }()
		_, _ = parser.Parse("TZ=UTC")
		return nil
	}()
	if panicked == nil {
		t.Fatal(`robfig no longer panics on "TZ=UTC"; the guard can go, but keep the clear error`)
	}
	if _, err := safeParse("TZ=UTC"); err == nil || !strings.Contains(err.Error(), "parser failed") {
		t.Fatalf("safeParse(TZ=UTC) = %v, want the recovered panic as an error", err)
	}
}

func TestNextAcrossDaylightSavingChanges(t *testing.T) {
	for _, tc := range []struct {
		name, spec, from string
		want             []string
	}{
		{
			// 2025-03-30: clocks go from 02:00 CET to 03:00 CEST. 02:30 doesn't
			// exist: it fires when the gap ends (03:00 CEST, 01:00 UTC), once.
			name: "spring forward skips 02:30", spec: "CRON_TZ=Europe/Berlin 30 2 * * *", from: "2025-03-29T12:00:00Z",
			want: []string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z", "2025-04-01T00:30:00Z"},
		},
		{
			// 2025-10-26: clocks go from 03:00 CEST back to 02:00 CET, so 02:30
			// happens twice: it fires at the first only.
			name: "autumn repeats 02:30", spec: "CRON_TZ=Europe/Berlin 30 2 * * *", from: "2025-10-25T12:00:00Z",
			want: []string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"},
		},
		{
			name: "autumn from inside the repeated hour", spec: "CRON_TZ=Europe/Berlin 30 2 * * *", from: "2025-10-26T01:10:00Z",
			want: []string{"2025-10-27T01:30:00Z"},
		},
		{
			name: "hourly counts real hours in spring", spec: "CRON_TZ=Europe/Berlin 0 * * * *", from: "2025-03-29T23:30:00Z",
			want: []string{"2025-03-30T00:00:00Z", "2025-03-30T01:00:00Z", "2025-03-30T02:00:00Z"},
		},
		{
			name: "hourly counts real hours in autumn", spec: "CRON_TZ=Europe/Berlin 0 * * * *", from: "2025-10-25T23:30:00Z",
			want: []string{"2025-10-26T00:00:00Z", "2025-10-26T01:00:00Z", "2025-10-26T02:00:00Z"},
		},
		{
			name: "every counts real time", spec: "@every 1h", from: "2025-03-30T00:30:00Z",
			want: []string{"2025-03-30T01:30:00Z", "2025-03-30T02:30:00Z"},
		},
		{
			name: "daily 9:00 keeps local time across the change", spec: "CRON_TZ=America/New_York 0 9 * * *", from: "2025-03-08T12:00:00Z",
			want: []string{"2025-03-08T14:00:00Z", "2025-03-09T13:00:00Z", "2025-03-10T13:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec, "")
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, tc.from)
			for i, w := range tc.want {
				at = s.Next(at)
				if !at.Equal(mustTime(t, w)) {
					t.Fatalf("fire %d = %s (%s), want %s", i+1, at.UTC().Format(time.RFC3339), at.In(s.Location()).Format(time.RFC3339), w)
				}
			}
		})
	}
}

func TestLastBefore(t *testing.T) {
	every, _ := ParseSchedule("@every 1s", "")
	daily, _ := ParseSchedule("0 9 * * *", "UTC")
	for _, tc := range []struct {
		name       string
		s          Schedule
		after, now string
		want       string // "" for none
	}{
		{"daily, a week down", daily, "2025-06-03T09:00:00Z", "2025-06-10T12:00:00Z", "2025-06-10T09:00:00Z"},
		{"daily, nothing missed", daily, "2025-06-10T09:00:00Z", "2025-06-10T12:00:00Z", ""},
		{"daily, the fire is exactly now", daily, "2025-06-09T09:00:00Z", "2025-06-10T09:00:00Z", "2025-06-10T09:00:00Z"},
		{"daily, after is later than now", daily, "2025-06-11T09:00:00Z", "2025-06-10T09:00:00Z", ""},
		{"every second, a year down", every, "2024-06-10T12:00:00Z", "2025-06-10T12:00:00Z", "2025-06-10T12:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, ok := tc.s.lastBefore(mustTime(t, tc.after), mustTime(t, tc.now))
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("lastBefore took %s", took)
			}
			if tc.want == "" {
				if ok {
					t.Fatalf("lastBefore = %s, want none", got)
				}
				return
			}
			if !ok || !got.Equal(mustTime(t, tc.want)) {
				t.Fatalf("lastBefore = %s, %v; want %s", got, ok, tc.want)
			}
		})
	}
}

// An anchored @every counts its fires from the anchor, whatever time it is
// asked from, so two replicas (or a restart) agree on every fire time.
func TestAnchoredEvery(t *testing.T) {
	anchor := "2025-06-02T10:00:00.700Z" // cut to 10:00:00
	for _, tc := range []struct {
		name, spec, from string
		want             []string
	}{
		{"from the anchor", "@every 15s", "2025-06-02T10:00:00.700Z", []string{"2025-06-02T10:00:15Z", "2025-06-02T10:00:30Z"}},
		{"from between fires", "@every 15s", "2025-06-02T10:00:21.300Z", []string{"2025-06-02T10:00:30Z", "2025-06-02T10:00:45Z"}},
		{"from a fire time", "@every 15s", "2025-06-02T10:00:30Z", []string{"2025-06-02T10:00:45Z"}},
		{"from before the anchor", "@every 15s", "2025-06-02T09:00:00Z", []string{"2025-06-02T10:00:15Z"}},
		{"a day later", "@every 90m", "2025-06-03T10:10:00Z", []string{"2025-06-03T11:30:00Z", "2025-06-03T13:00:00Z"}},
		{"fixed schedules ignore it", "*/20 * * * * *", "2025-06-02T10:00:21Z", []string{"2025-06-02T10:00:40Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec, "UTC")
			if err != nil {
				t.Fatal(err)
			}
			s = s.Anchored(time.Date(2025, 6, 2, 10, 0, 0, 700e6, time.UTC))
			at, err := time.Parse(time.RFC3339Nano, tc.from)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				at = s.Next(at)
				if !at.Equal(mustTime(t, w)) {
					t.Fatalf("fire %d = %s, want %s (anchor %s)", i+1, at.UTC().Format(time.RFC3339Nano), w, anchor)
				}
			}
		})
	}
	s, _ := ParseSchedule("@every 15s", "UTC")
	s = s.Anchored(mustTime(t, "2025-06-02T10:00:00Z"))
	if got, ok := s.lastBefore(mustTime(t, "2025-06-02T10:00:00Z"), mustTime(t, "2025-06-03T10:00:07Z")); !ok || !got.Equal(mustTime(t, "2025-06-03T10:00:00Z")) {
		t.Fatalf("lastBefore = %s, %v", got, ok)
	}
}
