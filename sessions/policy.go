package sessions

import "time"

// Policy says when an agent's sessions reset on their own.
type Policy struct {
	// IdleTimeout resets a session idle for longer than this; 0 turns it off.
	IdleTimeout time.Duration
	// DailyReset turns on the daily reset at DailyResetHour (0-23) in Location.
	DailyReset     bool
	DailyResetHour int
	// Location is the agent's time zone; nil means UTC.
	Location *time.Location
}

// Stale reports whether a session last active at lastActive must reset at
// now, and why (ReasonIdle or ReasonDaily).
func (p Policy) Stale(lastActive, now time.Time) (string, bool) {
	if p.IdleTimeout > 0 && now.Sub(lastActive) > p.IdleTimeout {
		return ReasonIdle, true
	}
	if p.DailyReset && lastActive.Before(p.lastDailyReset(now)) {
		return ReasonDaily, true
	}
	return "", false
}

// lastDailyReset is the latest daily reset time at or before now. A day
// that is 23 or 25 hours long (DST) still has exactly one reset: a repeated
// hour resets at its first instance, and a skipped hour at the first
// instant after the gap.
func (p Policy) lastDailyReset(now time.Time) time.Time {
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	n := now.In(loc)
	b := resetOn(n.Year(), n.Month(), n.Day(), p.DailyResetHour, loc)
	if b.After(n) {
		b = resetOn(n.Year(), n.Month(), n.Day()-1, p.DailyResetHour, loc)
	}
	return b
}

// resetOn is the first instant of hour on the given day in loc.
func resetOn(year int, month time.Month, day, hour int, loc *time.Location) time.Time {
	noon := time.Date(year, month, day, 12, 0, 0, 0, loc) // normalizes day 0 and the like
	y, m, d := noon.Date()
	b := time.Date(y, m, d, hour, 0, 0, 0, loc)
	// Inside a DST gap time.Date may land before the gap; step past it.
	for range 16 {
		l := b.In(loc)
		ly, lm, ld := l.Date()
		sameDay := ly == y && lm == m && ld == d
		if !(sameDay && l.Hour() < hour) && !l.Before(time.Date(y, m, d, 0, 0, 0, 0, loc)) {
			break
		}
		b = b.Add(15 * time.Minute)
	}
	return b
}
