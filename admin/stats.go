package admin

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
)

// The charts' numbers are added up by the database, an hour at a time
// from the window's start (integer division of the millisecond times, the
// same on both engines); Go folds the hours into days. Only the reading of
// a reply's usage, stored as JSON text, is said per engine.
const (
	// usageByHourQuery sums the model calls' usage in the window, kept and
	// compacted messages alike, by hour, agent, channel and model. %[1]s
	// reads a usage field as an integer, %[2]s the cost as a number.
	usageByHourQuery = `SELECT bucket, agent_id, surface, model, COUNT(*), SUM(input), SUM(output), SUM(other), SUM(cost),
	SUM(CASE WHEN cost = 0 THEN input ELSE 0 END), SUM(CASE WHEN cost = 0 THEN output ELSE 0 END)
	FROM (
		SELECT (m.created_at - $1) / $2 AS bucket, s.agent_id, s.surface, m.model,
			%[1]s AS input, %[3]s AS output, %[4]s + %[5]s + %[6]s AS other, %[2]s AS cost
		FROM messages m JOIN sessions s ON s.id = m.session_id
		WHERE m.role = 'assistant' AND m.created_at >= $1 AND m.usage IS NOT NULL
		UNION ALL
		SELECT (m.created_at - $1) / $2, s.agent_id, s.surface, m.model,
			%[1]s, %[3]s, %[4]s + %[5]s + %[6]s, %[2]s
		FROM message_archive m JOIN sessions s ON s.id = m.session_id
		WHERE m.role = 'assistant' AND m.created_at >= $1 AND m.usage IS NOT NULL
	) u
	GROUP BY bucket, agent_id, surface, model`

	// turnsByHourQuery counts the messages received in the window that a
	// turn answered (done without a note) or that failed, by hour, channel
	// (the session's surface, as the usage has it), agent, outcome and how
	// long the answer took, in the latency classes of latencyBounds.
	turnsByHourQuery = `SELECT bucket, channel, agent_id, status, class, COUNT(*)
	FROM (
		SELECT (i.received_at - $1) / $2 AS bucket, COALESCE(s.surface, i.adapter) AS channel, COALESCE(s.agent_id, '') AS agent_id,
			i.status, %s AS class
		FROM inbound i LEFT JOIN sessions s ON s.id = i.session_id
		WHERE i.received_at >= $1 AND ((i.status = 'done' AND i.error = '' AND i.session_id IS NOT NULL) OR i.status = 'failed')
	) t
	GROUP BY bucket, channel, agent_id, status, class`

	// backlogRowsQuery is every reply that waited at some time in the
	// window: still unsent, or sent within it.
	backlogRowsQuery = `SELECT created_at, COALESCE(sent_at, 0) FROM outbox WHERE sent_at IS NULL OR sent_at >= $1`
)

// latencyBounds are the upper bounds, in seconds, of the classes the time
// to answer is counted in; the percentiles are interpolated within a
// class, as Prometheus' histogram_quantile does.
var latencyBounds = []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// latencyClassSQL is the CASE that puts a time to answer in its class:
// the index of the first bound it is under, len(latencyBounds) past them.
func latencyClassSQL() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, bound := range latencyBounds {
		fmt.Fprintf(&b, " WHEN i.updated_at - i.received_at <= %d THEN %d", int64(bound*1000), i)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(latencyBounds))
	return b.String()
}

// usageField reads a field of a reply's usage JSON on the engine.
func usageField(d dbutil.Dialect, field string, number bool) string {
	if d == dbutil.Postgres {
		if number {
			return "COALESCE((m.usage::jsonb ->> '" + field + "')::double precision, 0)"
		}
		return "COALESCE((m.usage::jsonb ->> '" + field + "')::bigint, 0)"
	}
	if number {
		return "COALESCE(CAST(json_extract(m.usage, '$." + field + "') AS REAL), 0)"
	}
	return "COALESCE(CAST(json_extract(m.usage, '$." + field + "') AS INTEGER), 0)"
}

// usageQueryFor is usageByHourQuery for the engine.
func usageQueryFor(d dbutil.Dialect) string {
	return fmt.Sprintf(usageByHourQuery, usageField(d, "input", false), usageField(d, "cost_usd", true), usageField(d, "output", false),
		usageField(d, "reasoning", false), usageField(d, "cache_read", false), usageField(d, "cache_write", false))
}

// turnsQuery is turnsByHourQuery with its latency classes.
var turnsQuery = fmt.Sprintf(turnsByHourQuery, latencyClassSQL())

// Window is the span the charts cover and the size of each bar.
type Window struct {
	Name  string // "24h" or "14d"
	Step  time.Duration
	Steps int
}

var (
	windowHours = Window{Name: "24h", Step: time.Hour, Steps: 24}
	windowDays  = Window{Name: "14d", Step: 24 * time.Hour, Steps: 14}
)

// windowNamed is the window a link names; the hours by default.
func windowNamed(name string) Window {
	if name == windowDays.Name {
		return windowDays
	}
	return windowHours
}

// buckets are the window's steps ending with the one holding now, each
// starting on the hour (or at local midnight), and their labels.
func (w Window) buckets(now time.Time) (starts []time.Time, labels []string) {
	now = now.Local()
	var last time.Time
	if w.Step == time.Hour {
		last = now.Truncate(time.Hour)
	} else {
		last = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	}
	for i := w.Steps - 1; i >= 0; i-- {
		var s time.Time
		if w.Step == time.Hour {
			s = last.Add(-time.Duration(i) * time.Hour)
		} else {
			s = last.AddDate(0, 0, -i)
		}
		starts = append(starts, s)
		if w.Step == time.Hour {
			labels = append(labels, s.Format("15:04"))
		} else {
			labels = append(labels, s.Format("Jan 2"))
		}
	}
	return starts, labels
}

// index is the bucket holding t, or -1 outside the window.
func index(starts []time.Time, t time.Time) int {
	if len(starts) == 0 || t.Before(starts[0]) {
		return -1
	}
	return sort.Search(len(starts), func(i int) bool { return starts[i].After(t) }) - 1
}

// Grouping is what the charts' series are: agents, models or channels.
type Grouping string

const (
	ByAgent   Grouping = "agent"
	ByModel   Grouping = "model"
	ByChannel Grouping = "channel"
)

func groupingNamed(name string) Grouping {
	switch Grouping(name) {
	case ByModel, ByChannel:
		return Grouping(name)
	}
	return ByAgent
}

// maxSeries bounds a chart's series; the rest are added up as "other".
const maxSeries = 7

// Stats are the charts' numbers over one window.
type Stats struct {
	Window   Window
	By       Grouping
	Labels   []string
	Turns    map[string][]float64 // by group (agent or channel; by model, channel)
	Tokens   map[string][]float64
	Cost     map[string][]float64
	P50, P95 []float64 // seconds from a message's arrival to its answer
	Errors   []float64
	Backlog  []float64 // replies waiting at the end of each step
	// Totals are each group's sums over the window, for the table under
	// the charts.
	Totals []GroupTotal
}

// GroupTotal is one agent's, model's or channel's sums over the window.
type GroupTotal struct {
	Name         string
	Turns        int
	Tokens       int64
	Cost         float64
	Input        int64
	Output       int64
	ModelReplies int
}

// price prices a call's tokens whose provider reported no cost.
type price func(spec string, input, output int64) (float64, bool)

// readStats adds up the window's turns, usage, errors and outbox from the
// database.
func readStats(ctx context.Context, db *dbutil.DB, w Window, by Grouping, now time.Time, pricer price) (Stats, error) {
	starts, labels := w.buckets(now)
	st := Stats{Window: w, By: by, Labels: labels, Turns: map[string][]float64{}, Tokens: map[string][]float64{},
		Cost: map[string][]float64{}, P50: make([]float64, len(starts)), P95: make([]float64, len(starts)),
		Errors: make([]float64, len(starts)), Backlog: make([]float64, len(starts))}
	since := dbutil.Millis(starts[0])
	totals := map[string]*GroupTotal{}
	total := func(name string) *GroupTotal {
		if totals[name] == nil {
			totals[name] = &GroupTotal{Name: name}
		}
		return totals[name]
	}
	add := func(m map[string][]float64, key string, i int, v float64) {
		if m[key] == nil {
			m[key] = make([]float64, len(starts))
		}
		m[key][i] += v
	}

	hour := func(bucket int64) int { return index(starts, starts[0].Add(time.Duration(bucket)*time.Hour)) }
	type usageRow struct {
		bucket                        int64
		agent, surface, model         string
		replies                       int
		input, output, other          int64
		cost                          float64
		unpricedInput, unpricedOutput int64
	}
	usage, err := dbutil.ViewQuery(ctx, db, usageQueryFor(db.Dialect), func(r dbutil.Scanner) (usageRow, error) {
		var u usageRow
		err := r.Scan(&u.bucket, &u.agent, &u.surface, &u.model, &u.replies, &u.input, &u.output, &u.other, &u.cost,
			&u.unpricedInput, &u.unpricedOutput)
		return u, err
	}, since, time.Hour.Milliseconds())
	if err != nil {
		return st, fmt.Errorf("read the usage of the last %s: %w", w.Name, err)
	}
	for _, u := range usage {
		i := hour(u.bucket)
		if i < 0 {
			continue
		}
		key := u.agent
		switch by {
		case ByModel:
			key = cmp.Or(u.model, "unknown")
		case ByChannel:
			key = u.surface
		}
		// A price is per token: the calls without a reported cost are
		// priced together.
		cost := u.cost
		if pricer != nil && (u.unpricedInput > 0 || u.unpricedOutput > 0) {
			if c, ok := pricer(u.model, u.unpricedInput, u.unpricedOutput); ok {
				cost += c
			}
		}
		tokens := u.input + u.output + u.other
		add(st.Tokens, key, i, float64(tokens))
		add(st.Cost, key, i, cost)
		t := total(key)
		t.Tokens += tokens
		t.Cost += cost
		t.Input += u.input
		t.Output += u.output
		t.ModelReplies += u.replies
	}

	type turnRow struct {
		bucket                 int64
		channel, agent, status string
		class, count           int
	}
	turns, err := dbutil.ViewQuery(ctx, db, turnsQuery, func(r dbutil.Scanner) (turnRow, error) {
		var t turnRow
		err := r.Scan(&t.bucket, &t.channel, &t.agent, &t.status, &t.class, &t.count)
		return t, err
	}, since, time.Hour.Milliseconds())
	if err != nil {
		return st, fmt.Errorf("read the turns of the last %s: %w", w.Name, err)
	}
	latencies := make([][]int, len(starts)) // per step, the count in each class
	for _, t := range turns {
		i := hour(t.bucket)
		if i < 0 {
			continue
		}
		if t.status == "failed" {
			st.Errors[i] += float64(t.count)
			continue
		}
		key := t.channel
		if by == ByAgent && t.agent != "" {
			key = t.agent
		}
		add(st.Turns, key, i, float64(t.count))
		if by != ByModel {
			total(key).Turns += t.count
		}
		if latencies[i] == nil {
			latencies[i] = make([]int, len(latencyBounds)+1)
		}
		latencies[i][min(max(t.class, 0), len(latencyBounds))] += t.count
	}
	for i, l := range latencies {
		st.P50[i], st.P95[i] = classQuantile(l, 0.50), classQuantile(l, 0.95)
	}

	type backlogRow struct{ created, sent int64 }
	backlog, err := dbutil.ViewQuery(ctx, db, backlogRowsQuery, func(r dbutil.Scanner) (backlogRow, error) {
		var b backlogRow
		err := r.Scan(&b.created, &b.sent)
		return b, err
	}, since)
	if err != nil {
		return st, fmt.Errorf("read the outbox of the last %s: %w", w.Name, err)
	}
	for i, s := range starts {
		end := s.Add(w.Step)
		if i == len(starts)-1 || end.After(now) {
			end = now
		}
		e := dbutil.Millis(end)
		for _, b := range backlog {
			if b.created <= e && (b.sent == 0 || b.sent > e) {
				st.Backlog[i]++
			}
		}
	}

	for _, t := range totals {
		st.Totals = append(st.Totals, *t)
	}
	slices.SortFunc(st.Totals, func(a, b GroupTotal) int {
		return cmp.Or(cmp.Compare(b.Tokens, a.Tokens), cmp.Compare(b.Turns, a.Turns), cmp.Compare(a.Name, b.Name))
	})
	return st, nil
}

// classQuantile estimates the q-quantile of the times counted in the
// latency classes, linearly within the class it falls in (the last class,
// past every bound, reads as its lower bound); not a number without any
// (the chart draws no point there).
func classQuantile(counts []int, q float64) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	below, lower := 0.0, 0.0
	for i, c := range counts {
		if i == len(latencyBounds) {
			return lower
		}
		upper := latencyBounds[i]
		if c > 0 && below+float64(c) >= rank {
			return lower + (upper-lower)*(rank-below)/float64(c)
		}
		below += float64(c)
		lower = upper
	}
	return lower
}

// series turns a map of groups into a chart's series, the largest first,
// past maxSeries added up as "other".
func series(m map[string][]float64) []Series {
	keys := slices.Collect(maps.Keys(m))
	sum := func(vs []float64) (s float64) {
		for _, v := range vs {
			s += v
		}
		return s
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(sum(m[b]), sum(m[a])), cmp.Compare(a, b)) })
	var out []Series
	for i, k := range keys {
		if i < maxSeries {
			out = append(out, Series{Name: k, Values: m[k]})
			continue
		}
		if i == maxSeries {
			out = append(out, Series{Name: "other", Values: make([]float64, len(m[k]))})
		}
		for j, v := range m[k] {
			out[maxSeries].Values[j] += v
		}
	}
	return out
}

// Charts are the charts of the stats, in the order the page shows them.
func (st Stats) Charts(fallbacks []float64) []Chart {
	per := "per hour, the last 24 hours"
	if st.Window.Step != time.Hour {
		per = "per day, the last 14 days"
	}
	turnsBy := string(st.By)
	if st.By == ByModel {
		turnsBy = "channel" // a turn may call several models
	}
	ms := func(vs []float64) []float64 {
		out := make([]float64, len(vs))
		for i, v := range vs {
			out[i] = v * 1000
		}
		return out
	}
	errs := []Series{{Name: "errors", Values: st.Errors}}
	if fallbacks != nil {
		errs = append(errs, Series{Name: "fallbacks", Values: fallbacks})
	}
	return []Chart{
		{ID: "chart-turns", Title: "Turns " + per + ", by " + turnsBy, Desc: "Messages answered by a turn.", Labels: st.Labels, Series: series(st.Turns)},
		{ID: "chart-latency", Title: "Time to answer " + per + ": p50 and p95", Unit: "ms", Lines: true,
			Desc: "From a message's arrival to its answer, the median and the 95th percentile.", Labels: st.Labels,
			Series: []Series{{Name: "p50", Values: ms(st.P50)}, {Name: "p95", Values: ms(st.P95)}}},
		{ID: "chart-tokens", Title: "Tokens " + per + ", by " + string(st.By), Desc: "Every token the models read and wrote.", Labels: st.Labels, Series: series(st.Tokens)},
		{ID: "chart-cost", Title: "Cost " + per + ", by " + string(st.By), Unit: "$", Desc: "Dollars, as the providers or the price table (budgets.prices) give them.", Labels: st.Labels, Series: series(st.Cost)},
		{ID: "chart-errors", Title: "Errors and fallbacks " + per, Desc: "Messages whose turn failed, and model calls a fallback model answered (since parley started).", Labels: st.Labels, Series: errs},
		{ID: "chart-backlog", Title: "Outbox backlog " + per, Lines: true, Desc: "Replies waiting to be sent at the end of each step.", Labels: st.Labels,
			Series: []Series{{Name: "waiting", Values: st.Backlog}}},
	}
}
