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

// resetOn is the first instant on the given day in loc whose local hour is
// at least hour. It searches forward in 15-minute steps (every zone's offset
// is a multiple of 15 minutes) from three hours before the naive time, so a
// repeated hour resets at its first instance, and a skipped one at the end
// of the gap, in every zone.
func resetOn(year int, month time.Month, day, hour int, loc *time.Location) time.Time {
	noon := time.Date(year, month, day, 12, 0, 0, 0, loc) // normalizes day 0 and the like
	y, m, d := noon.Date()
	naive := time.Date(y, m, d, hour, 0, 0, 0, loc)
	for t := naive.Add(-3 * time.Hour); !t.After(noon.Add(12 * time.Hour)); t = t.Add(15 * time.Minute) {
		l := t.In(loc)
		ly, lm, ld := l.Date()
		if ly == y && lm == m && ld == d && l.Hour() >= hour {
			return t
		}
	}
	return naive
}
