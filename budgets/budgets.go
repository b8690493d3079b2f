// Package budgets keeps the daily spend caps: usage_daily holds what each
// user, session and agent used a day (UTC), written with each reply while a
// cap is set, and a turn is refused before it starts once a cap is
// reached.
package budgets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyd/parley/agent"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/metrics"
	"github.com/parleyd/parley/sessions"
)

const upsertUsageQuery = `INSERT INTO usage_daily (day, scope, tokens, cost) VALUES ($1, $2, $3, $4)
	ON CONFLICT (day, scope) DO UPDATE SET tokens = usage_daily.tokens + excluded.tokens, cost = usage_daily.cost + excluded.cost`

const sessionKeyQuery = `SELECT user_id, surface, agent_id FROM sessions WHERE id = $1`

const usageQuery = `SELECT tokens, cost FROM usage_daily WHERE day = $1 AND scope = $2`

// usageDay is the day usage counts in.
func usageDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// scopes are the usage_daily scopes of a session's turn.
func scopes(key sessions.Key, id sessions.ID) (user, session, agent string) {
	return "user:" + key.Surface + ":" + key.UserID, "session:" + string(id), "agent:" + key.AgentID
}

// Caps are the spend caps over one database.
type Caps struct {
	db *dbutil.DB
	// caps are the caps in force (a reload changes them).
	caps func() config.Budgets
	// refused counts a turn refused at a cap, by its scope.
	refused func(scope string)
}

// New returns the caps over db: caps gives those in force at each use,
// refused (if set) counts a refusal.
func New(db *dbutil.DB, caps func() config.Budgets, refused func(scope string)) *Caps {
	if refused == nil {
		refused = func(string) {}
	}
	return &Caps{db: db, caps: caps, refused: refused}
}

// Record records an assistant message's usage against its user, session
// and agent, in the message's own transaction, while a cap is set (nothing
// reads usage_daily without one, so a reply's transaction skips its four
// statements).
func (c *Caps) Record(ctx context.Context, q dbutil.Querier, m sessions.Message) error {
	if m.Role != sessions.RoleAssistant || m.Usage == nil {
		return nil
	}
	b := c.caps()
	if !b.Any() {
		return nil
	}
	u := *m.Usage
	tokens := u.Input + u.Output + u.Reasoning + u.CacheRead + u.CacheWrite
	cost := u.CostUSD
	if cost == 0 {
		if p, ok := b.Price(m.Model); ok {
			cost = p.Cost(u.Input+u.CacheRead+u.CacheWrite, u.Output+u.Reasoning)
		}
	}
	if tokens == 0 && cost == 0 {
		return nil
	}
	var key sessions.Key
	if err := q.QueryRowContext(ctx, sessionKeyQuery, string(m.SessionID)).Scan(&key.UserID, &key.Surface, &key.AgentID); err != nil {
		return fmt.Errorf("find the session of a reply's usage: %w", err)
	}
	day := usageDay(time.Now())
	user, sess, agent := scopes(key, m.SessionID)
	for _, scope := range []string{user, sess, agent} {
		if _, err := q.ExecContext(ctx, upsertUsageQuery, day, scope, tokens, cost); err != nil {
			return fmt.Errorf("record usage: %w", err)
		}
	}
	return nil
}

// spent is what a scope used today.
type spent struct {
	Tokens int64   `json:"tokens"`
	USD    float64 `json:"usd"`
}

// Budget is what is left today of each cap that applies to a session.
type Budget struct {
	Day    string     `json:"day"`
	Limits []CapState `json:"caps"`
}

// CapState is one cap, what was used of it, and whether it is reached.
type CapState struct {
	Scope   string  `json:"scope"` // user, session or agent
	Unit    string  `json:"unit"`  // tokens or usd
	Limit   float64 `json:"limit"`
	Used    float64 `json:"used"`
	Left    float64 `json:"left"`
	Reached bool    `json:"reached"`
}

// Budget reads what a session's caps have left today.
func (c *Caps) Budget(ctx context.Context, key sessions.Key, id sessions.ID) (Budget, error) {
	b := c.caps()
	out := Budget{Day: usageDay(time.Now()), Limits: []CapState{}}
	if !b.Any() {
		return out, nil
	}
	user, sess, agent := scopes(key, id)
	for _, sc := range []struct {
		name, scope string
		tokens      int64
		usd         float64
	}{{"user", user, b.UserDailyTokens, b.UserDailyUSD}, {"session", sess, b.SessionDailyTokens, b.SessionDailyUSD},
		{"agent", agent, b.AgentDailyTokens, b.AgentDailyUSD}} {
		if sc.tokens <= 0 && sc.usd <= 0 {
			continue
		}
		var s spent
		err := c.db.Reader().QueryRowContext(ctx, usageQuery, out.Day, sc.scope).Scan(&s.Tokens, &s.USD)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return out, fmt.Errorf("read today's usage: %w", err)
		}
		if sc.tokens > 0 {
			out.Limits = append(out.Limits, capState(sc.name, "tokens", float64(sc.tokens), float64(s.Tokens)))
		}
		if sc.usd > 0 {
			out.Limits = append(out.Limits, capState(sc.name, "usd", sc.usd, s.USD))
		}
	}
	return out, nil
}

func capState(scope, unit string, limit, used float64) CapState {
	left := max(limit-used, 0)
	return CapState{Scope: scope, Unit: unit, Limit: limit, Used: used, Left: left, Reached: used >= limit}
}

// refusal is the message a turn past a cap gets, or "" when none is
// reached.
func (b Budget) refusal() (string, string) {
	for _, c := range b.Limits {
		if !c.Reached {
			continue
		}
		who := map[string]string{"user": "you", "session": "this conversation", "agent": "this assistant"}[c.Scope]
		return fmt.Sprintf("Sorry, %s reached today's usage limit, so I can't answer now. It resets at midnight UTC; the operator can raise it (budgets in parley's config).", who), c.Scope
	}
	return "", ""
}

// Line says what is left, for /status.
func (b Budget) Line() string {
	if len(b.Limits) == 0 {
		return ""
	}
	parts := make([]string, len(b.Limits))
	for i, c := range b.Limits {
		if c.Unit == "usd" {
			parts[i] = fmt.Sprintf("%s $%.2f of $%.2f left", c.Scope, c.Left, c.Limit)
		} else {
			parts[i] = fmt.Sprintf("%s %.0f of %.0f tokens left", c.Scope, c.Left, c.Limit)
		}
	}
	return "Today: " + strings.Join(parts, " · ") + "."
}

// Admit refuses a turn once a spend cap of its session is reached: the
// person is told in plain words, and no provider is called.
func (c *Caps) Admit(ctx context.Context, s sessions.Session) error {
	if !c.caps().Any() {
		return nil
	}
	b, err := c.Budget(ctx, s.Key, s.ID)
	if err != nil {
		return err
	}
	text, scope := b.refusal()
	if text == "" {
		return nil
	}
	c.refused(scope)
	return &agent.RefusedError{Text: text, Reason: scope + " spend cap reached"}
}

const agentsTodayQuery = `SELECT scope, cost FROM usage_daily WHERE day = $1 AND scope LIKE 'agent:%'`

// AgentsToday is each of agents' spend today against budgets.agent_daily_usd,
// for the metrics an alert on a cap watches; none while that cap is unset
// (nothing is recorded without a cap).
func (c *Caps) AgentsToday(ctx context.Context, agents []string) ([]metrics.AgentSpend, error) {
	limit := c.caps().AgentDailyUSD
	if limit <= 0 {
		return nil, nil
	}
	rows, err := c.db.Reader().QueryContext(ctx, agentsTodayQuery, usageDay(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("read today's spend by agent: %w", err)
	}
	defer rows.Close()
	spent := map[string]float64{}
	for rows.Next() {
		var scope string
		var usd float64
		if err := rows.Scan(&scope, &usd); err != nil {
			return nil, fmt.Errorf("read today's spend by agent: %w", err)
		}
		spent[strings.TrimPrefix(scope, "agent:")] = usd
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read today's spend by agent: %w", err)
	}
	out := make([]metrics.AgentSpend, len(agents))
	for i, a := range agents {
		out[i] = metrics.AgentSpend{Agent: a, USD: spent[a], CapUSD: limit}
	}
	return out, nil
}
