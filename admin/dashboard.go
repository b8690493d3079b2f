package admin

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
)

// usage is the charts page: turns, time to answer, tokens, cost, errors
// and fallbacks, and the outbox backlog, per hour or per day, by agent,
// model or channel.
func (s *server) usage(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	win, by := windowNamed(q.Get("range")), groupingNamed(q.Get("by"))
	now := s.now()
	st, err := readStats(r.Context(), s.o.DB, win, by, now, s.price())
	if err != nil {
		return err
	}
	var fallbacks []float64
	if s.o.Fallbacks != nil {
		starts, _ := win.buckets(now)
		fallbacks = make([]float64, len(starts))
		for _, at := range s.o.Fallbacks() {
			if i := index(starts, at); i >= 0 {
				fallbacks[i]++
			}
		}
	}
	totals, table := sortPage(r, "", st.Totals, "-tokens",
		col("name", func(g GroupTotal) string { return g.Name }),
		col("turns", func(g GroupTotal) int { return g.Turns }),
		col("replies", func(g GroupTotal) int { return g.ModelReplies }),
		col("tokens", func(g GroupTotal) int64 { return g.Tokens }),
		col("input", func(g GroupTotal) int64 { return g.Input }),
		col("output", func(g GroupTotal) int64 { return g.Output }),
		col("cost", func(g GroupTotal) float64 { return g.Cost }))
	s.render(w, r, "usage", map[string]any{"Charts": st.Charts(fallbacks), "Range": win.Name, "By": string(by),
		"Totals": totals, "T": table})
	return nil
}

func (s *server) price() price {
	if s.o.Config == nil {
		return nil
	}
	return func(spec string, in, out int64) (float64, bool) { return s.o.Config().Budgets.Cost(spec, in, out) }
}

// person is a row of the people page.
type person struct {
	gateway.Person
	// Surface is the channel's type (telegram, discord...).
	Surface string
}

func (s *server) people(w http.ResponseWriter, r *http.Request) error {
	list, err := s.o.Outbox.People(r.Context())
	if err != nil {
		return err
	}
	types := map[adapters.ID]string{}
	if s.o.Config != nil {
		for _, a := range s.o.Config().Adapters {
			types[adapters.ID(a.ID)] = a.Type
		}
	}
	rows := make([]person, len(list))
	counts := map[string]int{}
	for i, p := range list {
		rows[i] = person{Person: p, Surface: types[p.Adapter]}
		counts[p.State]++
	}
	if st := r.URL.Query().Get("state"); st != "" {
		rows = slices.DeleteFunc(rows, func(p person) bool { return p.State != st })
	}
	shown, table := sortPage(r, "", rows, "name",
		col("name", func(p person) string { return strings.ToLower(p.Label()) }),
		col("channel", func(p person) string { return string(p.Adapter) }),
		col("id", func(p person) string { return p.UserID }),
		col("state", func(p person) string { return p.State }),
		col("since", func(p person) int64 { return p.Since.UnixMilli() }))
	s.render(w, r, "people", map[string]any{"People": shown, "T": table, "Counts": counts, "State": r.URL.Query().Get("state")})
	return nil
}

// personAction revokes, blocks or unblocks a person from the people page.
func (s *server) personAction(w http.ResponseWriter, r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return err
	}
	adapter, user := adapters.ID(r.PostFormValue("channel")), r.PostFormValue("user")
	if adapter == "" || user == "" || !plainText(string(adapter)) || !plainText(user) {
		back(w, r, "/admin/people", "The form named no channel or person; reload the page and try again.")
		return nil
	}
	if s.o.Config != nil {
		var ids []string
		for _, a := range s.o.Config().Adapters {
			ids = append(ids, a.ID)
		}
		if !slices.Contains(ids, string(adapter)) {
			back(w, r, "/admin/people", fmt.Sprintf("There is no channel %q in the config; its channels: %s.", adapter, cmp.Or(strings.Join(ids, ", "), "none")))
			return nil
		}
	}
	name := cmp.Or(r.PostFormValue("name"), user)
	var ok bool
	var err error
	var done, undone string
	switch r.PathValue("action") {
	case "revoke":
		ok, err = s.o.Outbox.Revoke(r.Context(), adapter, user)
		done = "Revoked " + name + " on " + string(adapter) + ": their next message is refused and gets a new pairing code."
		undone = name + " was not approved on " + string(adapter) + "; nothing to revoke."
	case "block":
		ok, err = s.o.Outbox.Block(r.Context(), adapter, user)
		done = "Blocked " + name + " on " + string(adapter) + ": their messages are dropped unanswered."
		undone = name + " was blocked on " + string(adapter) + " already."
	case "unblock":
		ok, err = s.o.Outbox.Unblock(r.Context(), adapter, user)
		done = "Unblocked " + name + " on " + string(adapter) + ": their next message gets a pairing code to approve."
		undone = name + " was not blocked on " + string(adapter) + "."
	default:
		return errNotFound
	}
	switch {
	case err != nil:
		back(w, r, "/admin/people", err.Error())
	case ok:
		s.o.Log.InfoContext(r.Context(), "access changed from the dashboard", "action", r.PathValue("action"), "adapter", adapter, "user_id", user)
		back(w, r, "/admin/people", done)
	default:
		back(w, r, "/admin/people", undone)
	}
	return nil
}

// agentView is a row of the agents page.
type agentView struct {
	ID, Model          string
	Fallbacks, Tools   []string
	Permissions        []string
	MaxSteps           int
	CapUSD             float64
	CapTokens          int64
	TodayUSD           float64
	TodayTokens        int64
	Replies            int
	ProviderConfigured bool
}

type spend struct {
	usd     float64
	tokens  int64
	replies int
}

// spentToday is each agent's spend since midnight UTC, the day the spend
// caps count, added up by the database as the charts' usage is.
func (s *server) spentToday(ctx context.Context) (map[string]spend, error) {
	now := s.now().UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	type row struct {
		agent, model                  string
		replies                       int
		tokens                        int64
		cost                          float64
		unpricedInput, unpricedOutput int64
	}
	rows, err := dbutil.ViewQuery(ctx, s.o.DB, usageQueryFor(s.o.DB.Dialect), func(r dbutil.Scanner) (row, error) {
		var x row
		var bucket, input, output, other int64
		var surface string
		err := r.Scan(&bucket, &x.agent, &surface, &x.model, &x.replies, &input, &output, &other, &x.cost, &x.unpricedInput, &x.unpricedOutput)
		x.tokens = input + output + other
		return x, err
	}, dbutil.Millis(midnight), (24 * time.Hour).Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("read today's spend by agent: %w", err)
	}
	pricer := s.price()
	out := map[string]spend{}
	for _, x := range rows {
		cost := x.cost
		if pricer != nil && (x.unpricedInput > 0 || x.unpricedOutput > 0) {
			if c, ok := pricer(x.model, x.unpricedInput, x.unpricedOutput); ok {
				cost += c
			}
		}
		sp := out[x.agent]
		sp.usd += cost
		sp.tokens += x.tokens
		sp.replies += x.replies
		out[x.agent] = sp
	}
	return out, nil
}

func (s *server) agents(w http.ResponseWriter, r *http.Request) error {
	if s.o.Config == nil {
		return errNotFound
	}
	cfg := s.o.Config()
	today, err := s.spentToday(r.Context())
	if err != nil {
		return err
	}
	var rows []agentView
	for _, a := range cfg.Agents {
		v := agentView{ID: a.ID, Model: a.Model, Fallbacks: a.FallbackModels, Tools: a.Tools, MaxSteps: a.MaxSteps,
			CapUSD: cfg.Budgets.AgentDailyUSD, CapTokens: cfg.Budgets.AgentDailyTokens,
			TodayUSD: today[a.ID].usd, TodayTokens: today[a.ID].tokens, Replies: today[a.ID].replies}
		v.ProviderConfigured = modelUsable(cfg, a.Model)
		for _, p := range a.Permissions {
			rule := p.Tool + ": " + p.Action
			if p.Pin {
				rule += " (pinned)"
			}
			v.Permissions = append(v.Permissions, rule)
		}
		for _, p := range cfg.Permissions.Rules {
			if p.Agent == "" || p.Agent == a.ID {
				v.Permissions = append(v.Permissions, p.Tool+": "+p.Action+" (project"+userSuffix(p.User)+")")
			}
		}
		rows = append(rows, v)
	}
	shown, table := sortPage(r, "", rows, "id",
		col("id", func(a agentView) string { return a.ID }),
		col("model", func(a agentView) string { return a.Model }),
		col("steps", func(a agentView) int { return a.MaxSteps }),
		col("spend", func(a agentView) float64 { return a.TodayUSD }),
		col("tokens", func(a agentView) int64 { return a.TodayTokens }))
	s.render(w, r, "agents", map[string]any{"Agents": shown, "T": table, "Budgets": cfg.Budgets})
	return nil
}

func userSuffix(u string) string {
	if u == "" {
		return ""
	}
	return ", for " + u
}

// modelUsable says whether a model spec's provider is echo or configured.
func modelUsable(cfg *config.Config, spec string) bool {
	provider := providerOf(spec)
	if provider == "echo" {
		return true
	}
	p, ok := cfg.Providers[provider]
	return ok && p.Configured()
}

// providerOf is the provider a model spec names: "openai" of
// "openai/gpt-4o-mini", "echo" of "echo".
func providerOf(spec string) string {
	provider, _, _ := strings.Cut(spec, "/")
	return provider
}

// providerView is a row of the providers page: a provider's settings and
// what parley saw of its models since it started.
type providerView struct {
	Name          string
	Configured    bool
	BaseURL       string
	MaxConcurrent int
	InFlight      int
	Calls, Errors int
	Models        []metrics.ModelStats
	// Health is "ok", "failing" (its latest call failed), "idle" (no
	// call yet) or "not configured".
	Health string
}

func (s *server) providers(w http.ResponseWriter, r *http.Request) error {
	if s.o.Config == nil {
		return errNotFound
	}
	cfg := s.o.Config()
	var stats []metrics.ModelStats
	if s.o.Models != nil {
		stats = s.o.Models()
	}
	byName := map[string]*providerView{}
	view := func(name string) *providerView {
		if byName[name] == nil {
			byName[name] = &providerView{Name: name, Health: "idle"}
		}
		return byName[name]
	}
	for name, p := range cfg.Providers {
		v := view(name)
		v.Configured, v.MaxConcurrent, v.BaseURL = p.Configured(), p.MaxConcurrent, config.RedactURL(p.BaseURL)
	}
	for _, a := range cfg.Agents {
		for _, spec := range append([]string{a.Model}, a.FallbackModels...) {
			if provider := providerOf(spec); provider != "" {
				v := view(provider)
				v.Configured = v.Configured || provider == "echo"
			}
		}
	}
	for _, m := range stats {
		v := view(m.Provider)
		v.Models = append(v.Models, m)
		v.InFlight += m.InFlight
		v.Calls += m.Calls
		v.Errors += m.Errors
	}
	var rows []providerView
	for _, v := range byName {
		var lastOK, lastErr time.Time
		for _, m := range v.Models {
			lastOK, lastErr = later(lastOK, m.LastOK), later(lastErr, m.LastError)
		}
		switch {
		case !v.Configured:
			v.Health = "not configured"
		case lastErr.After(lastOK):
			v.Health = "failing"
		case !lastOK.IsZero():
			v.Health = "ok"
		}
		rows = append(rows, *v)
	}
	shown, table := sortPage(r, "", rows, "name",
		col("name", func(p providerView) string { return p.Name }),
		col("health", func(p providerView) string { return p.Health }),
		col("calls", func(p providerView) int { return p.Calls }),
		col("errors", func(p providerView) int { return p.Errors }),
		col("inflight", func(p providerView) int { return p.InFlight }))
	s.render(w, r, "providers", map[string]any{"Providers": shown, "T": table})
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (s *server) replicas(w http.ResponseWriter, r *http.Request) error {
	var list []cluster.Replica
	var err error
	if s.o.Replicas != nil {
		if list, err = s.o.Replicas(r.Context()); err != nil {
			return err
		}
	}
	shown, table := sortPage(r, "", list, "started",
		col("name", func(x cluster.Replica) string { return x.Name }),
		col("host", func(x cluster.Replica) string { return x.Host }),
		col("started", func(x cluster.Replica) int64 { return x.Started.UnixMilli() }),
		col("heartbeat", func(x cluster.Replica) int64 { return x.HeartbeatAgeMS }),
		col("lanes", func(x cluster.Replica) int { return x.Lanes }))
	s.render(w, r, "replicas", map[string]any{"Replicas": shown, "T": table, "Clustered": s.o.Replicas != nil})
	return nil
}

// names are the people's display names, by channel type and user id as a
// session's key has them ("telegram", "5550001"); nil when none is known.
func (s *server) names(ctx context.Context) map[[2]string]string {
	if s.o.Outbox == nil || s.o.Config == nil {
		return nil
	}
	people, err := s.o.Outbox.People(ctx)
	if err != nil {
		s.o.Log.WarnContext(ctx, "read people's names for the dashboard", "error", err)
		return nil
	}
	types := map[adapters.ID]string{}
	for _, a := range s.o.Config().Adapters {
		types[adapters.ID(a.ID)] = a.Type
	}
	out := map[[2]string]string{}
	for _, p := range people {
		if p.Name != "" && types[p.Adapter] != "" {
			out[[2]string{types[p.Adapter], p.UserID}] = p.Name
		}
	}
	return out
}

// nameOf is the display name of a session's person, "" when unknown or
// for a group.
func nameOf(names map[[2]string]string, k sessions.Key) string {
	if k.UserID == "" {
		return ""
	}
	return names[[2]string{k.Surface, k.UserID}]
}

// nameIn is the display name a channel gave with the latest message of a
// direct session's chat, for people no pairing named (under an open
// policy, or in the config's allow list): "" when none did.
func (s *server) nameIn(ctx context.Context, k sessions.Key) string {
	if k.UserID == "" || s.o.Outbox == nil || s.o.Config == nil {
		return ""
	}
	for _, a := range s.o.Config().Adapters {
		if a.Type != k.Surface {
			continue
		}
		name, err := s.o.Outbox.NameIn(ctx, adapters.ID(a.ID), k.SurfaceID, k.UserID)
		if err != nil {
			s.o.Log.WarnContext(ctx, "read a person's name for the dashboard", "error", err)
			return ""
		}
		if name != "" {
			return name
		}
	}
	return ""
}
