package cron

import (
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// parser accepts 5 fields, 6 with seconds first, and descriptors (@daily,
// @every 1h), as DEPENDENCIES.md sets it up.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// scheduleHelp says what a valid schedule looks like; every parse error ends
// with it.
const scheduleHelp = `write 5 fields (minute hour day-of-month month day-of-week) such as "0 9 * * 1-5", ` +
	`6 with seconds first such as "30 0 9 * * *", or a descriptor such as @daily, @hourly or "@every 1h"; ` +
	`a time zone goes in front ("CRON_TZ=Europe/Berlin 0 9 * * *") or in the job's timezone key`

// Schedule is a parsed cron schedule in its time zone.
type Schedule struct {
	spec string
	loc  *time.Location
	// wall evaluates the fields on the wall clock (see Next); nil for
	// schedules that are instants (@every) or every hour.
	wall  *robfig.SpecSchedule
	inner robfig.Schedule
	// every is an @every schedule's interval, and anchor the instant its
	// fires count from (see Anchored); without an anchor they count from
	// the time Next is given, as robfig's do.
	every  time.Duration
	anchor time.Time
}

// ParseSchedule parses spec in the time zone tz ("" is the server's local
// time). spec may carry its own zone as a "CRON_TZ=" or "TZ=" prefix; giving
// a different zone in both places is an error. It never panics: robfig's
// parser does on "TZ=UTC" with nothing after it, so that is checked first and
// any other panic is recovered into an error.
func ParseSchedule(spec, tz string) (Schedule, error) {
	spec = strings.TrimSpace(spec)
	orig := spec
	if spec == "" {
		return Schedule{}, fmt.Errorf("%w: the schedule is empty; %s", ErrInvalidSchedule, scheduleHelp)
	}
	tz = strings.TrimSpace(tz)
	if prefix, ok := tzPrefix(spec); ok {
		zone, rest, _ := strings.Cut(spec[len(prefix):], " ")
		rest = strings.TrimSpace(rest)
		switch {
		case zone == "":
			return Schedule{}, fmt.Errorf("%w: %q names no time zone after %s; write e.g. \"%sEurope/Berlin 0 9 * * *\"", ErrInvalidSchedule, orig, prefix, prefix)
		case rest == "":
			return Schedule{}, fmt.Errorf("%w: %q has a time zone but no schedule after it; write e.g. \"%s%s 0 9 * * *\"", ErrInvalidSchedule, orig, prefix, zone)
		case tz != "" && tz != zone:
			return Schedule{}, fmt.Errorf("%w: %q says %s%s but the timezone key says %s; give the zone once", ErrInvalidSchedule, orig, prefix, zone, tz)
		}
		tz, spec = zone, rest
	}
	loc := time.Local
	if tz != "" {
		var err error
		if loc, err = loadLocation(tz); err != nil {
			return Schedule{}, err
		}
	}
	inner, err := safeParse(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: %q: %v; %s", ErrInvalidSchedule, orig, err, scheduleHelp)
	}
	s := Schedule{spec: orig, loc: loc, inner: inner}
	if cd, ok := inner.(robfig.ConstantDelaySchedule); ok {
		s.every = cd.Delay
	}
	if ss, ok := inner.(*robfig.SpecSchedule); ok {
		ss.Location = loc
		if ss.Hour&allHours != allHours {
			w := *ss
			w.Location = time.UTC
			s.wall = &w
		}
	}
	if s.Next(time.Now()).IsZero() {
		return Schedule{}, fmt.Errorf("%w: %q never fires: no date matches its day-of-month, month and day-of-week", ErrInvalidSchedule, orig)
	}
	return s, nil
}

// allHours is the hour field of a schedule that fires in every hour.
const allHours = 1<<24 - 1

func tzPrefix(spec string) (string, bool) {
	for _, p := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(spec, p) {
			return p, true
		}
	}
	return "", false
}

func loadLocation(tz string) (*time.Location, error) {
	if strings.EqualFold(tz, "local") {
		return nil, fmt.Errorf("%w: time zone %q: leave it out for the server's local time, or name a zone such as Europe/Berlin or UTC", ErrInvalidSchedule, tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: unknown time zone %q; use an IANA name such as Europe/Berlin, America/New_York or UTC", ErrInvalidSchedule, tz)
	}
	return loc, nil
}

// safeParse calls robfig's parser, turning a panic into an error.
func safeParse(spec string) (s robfig.Schedule, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("the parser failed on it (%v)", p)
		}
	}()
	return parser.Parse(spec)
}

// String is the schedule as written.
func (s Schedule) String() string { return s.spec }

// Location is the time zone the schedule's fields are read in.
func (s Schedule) Location() *time.Location { return s.loc }

// Anchored is the schedule with an @every schedule's fires counted from at
// (cut to the second): at+every, at+2*every, and so on, whatever time Next
// is asked from. Every replica and every restart then computes the same
// fire times, so a fire's receipt, unique per (job, scheduled time), is
// claimed once. A job's schedule is anchored at its creation. Other
// schedules, and a zero at, are returned unchanged.
func (s Schedule) Anchored(at time.Time) Schedule {
	if s.every > 0 && !at.IsZero() {
		s.anchor = at.Truncate(time.Second)
	}
	return s
}

// Next is the first fire time strictly after t, or the zero time if there is
// none within five years.
//
// Across a daylight saving change it behaves like Vixie cron. A schedule at
// fixed hours is read on the wall clock: a time the clocks skip (02:30 on
// the spring-forward day) fires when the skipped hour ends, and a time the
// clocks repeat (02:30 on the autumn day) fires once. A schedule that fires
// every hour, and @every, count real time, so they fire each real hour.
// robfig alone skips the first and fires the second twice.
func (s Schedule) Next(t time.Time) time.Time {
	if s.inner == nil {
		return time.Time{}
	}
	if !s.anchor.IsZero() {
		k := int64(1)
		if !t.Before(s.anchor) {
			k = int64(t.Sub(s.anchor)/s.every) + 1
		}
		return s.anchor.Add(time.Duration(k) * s.every).In(s.loc)
	}
	if s.wall == nil {
		return s.inner.Next(t.In(s.loc))
	}
	w := t.In(s.loc)
	wall := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.UTC)
	for range 3 { // a repeated hour may put one or two candidates at or before t
		wall = s.wall.Next(wall)
		if wall.IsZero() {
			return time.Time{}
		}
		if at := s.onWallClock(wall); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// onWallClock is the instant the wall time (given in UTC's fields) happens in
// the schedule's zone: the earlier of two in a repeated hour, and the moment
// the clocks jump for a time they skip.
func (s Schedule) onWallClock(wall time.Time) time.Time {
	// The offsets in force half a day either side are the candidates.
	before := offsetAt(wall.Add(-12*time.Hour), s.loc)
	var best time.Time
	for _, off := range []time.Duration{before, offsetAt(wall.Add(12*time.Hour), s.loc)} {
		at := wall.Add(-off)
		if sameWall(at.In(s.loc), wall) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if !best.IsZero() {
		return best
	}
	// Skipped: read with the earlier offset it lands just after the jump,
	// in the period the jump starts.
	start, _ := wall.Add(-before).In(s.loc).ZoneBounds()
	return start
}

func offsetAt(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}

func sameWall(a, wall time.Time) bool {
	return a.Year() == wall.Year() && a.YearDay() == wall.YearDay() && a.Hour() == wall.Hour() &&
		a.Minute() == wall.Minute() && a.Second() == wall.Second()
}

// lastBefore is the latest fire time in (after, now], if there is one. It
// looks back over windows that double in size, so a dense schedule after a
// long downtime costs a few steps rather than one per missed fire.
func (s Schedule) lastBefore(after, now time.Time) (time.Time, bool) {
	if !after.Before(now) {
		return time.Time{}, false
	}
	for w := time.Second; ; w *= 2 {
		start := now.Add(-w)
		if !start.After(after) {
			start = after
		}
		first := s.Next(start)
		if !first.IsZero() && !first.After(now) {
			last := first
			for n := s.Next(last); !n.IsZero() && !n.After(now); n = s.Next(n) {
				last = n
			}
			return last, true
		}
		if start.Equal(after) || w > 100*365*24*time.Hour {
			return time.Time{}, false
		}
	}
}
