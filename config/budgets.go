package config

import (
	"fmt"
	"strings"

	"github.com/parleyd/parley/config/section"
)

// Budgets are the spend caps: what a user, a session or an agent may use
// in a day (UTC), in tokens, or in dollars where the provider reports a
// cost or Prices give one. 0 is no cap. A turn that would start past a cap
// is refused with a plain message, and no provider is called.
type Budgets struct {
	UserDailyTokens    int64   `yaml:"user_daily_tokens"`
	SessionDailyTokens int64   `yaml:"session_daily_tokens"`
	AgentDailyTokens   int64   `yaml:"agent_daily_tokens"`
	UserDailyUSD       float64 `yaml:"user_daily_usd"`
	SessionDailyUSD    float64 `yaml:"session_daily_usd"`
	AgentDailyUSD      float64 `yaml:"agent_daily_usd"`
	// Prices are dollars per million tokens, per model, for providers that
	// report no cost.
	Prices []Price `yaml:"prices"`
}

// Price is a model's price in dollars per million tokens.
type Price struct {
	Model  string  `yaml:"model"`
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Cost is what input and output tokens cost at p, in dollars.
func (p Price) Cost(input, output int64) float64 {
	return (float64(input)*p.Input + float64(output)*p.Output) / 1e6
}

// Cost prices a call of model spec that used input and output tokens, if
// Prices has the model.
func (b Budgets) Cost(spec string, input, output int64) (float64, bool) {
	p, ok := b.Price(spec)
	if !ok {
		return 0, false
	}
	return p.Cost(input, output), true
}

// Any says whether any cap is set.
func (b Budgets) Any() bool {
	return b.UserDailyTokens > 0 || b.SessionDailyTokens > 0 || b.AgentDailyTokens > 0 ||
		b.UserDailyUSD > 0 || b.SessionDailyUSD > 0 || b.AgentDailyUSD > 0
}

// Price returns the price of model spec, if the table has it.
func (b Budgets) Price(spec string) (Price, bool) {
	for _, p := range b.Prices {
		if p.Model == spec {
			return p, true
		}
	}
	return Price{}, false
}

// SetDefaults trims the prices' models.
func (b *Budgets) SetDefaults(section.Set) {
	for i := range b.Prices {
		b.Prices[i].Model = strings.TrimSpace(b.Prices[i].Model)
	}
}

// Check reports the caps and prices that can't be.
func (b Budgets) Check(r section.Reporter) {
	for key, v := range map[string]float64{
		"user_daily_tokens": float64(b.UserDailyTokens), "session_daily_tokens": float64(b.SessionDailyTokens),
		"agent_daily_tokens": float64(b.AgentDailyTokens), "user_daily_usd": b.UserDailyUSD,
		"session_daily_usd": b.SessionDailyUSD, "agent_daily_usd": b.AgentDailyUSD,
	} {
		if v < 0 {
			r.Add(key, "must not be negative; 0 is no cap")
		}
	}
	for i, p := range b.Prices {
		if !strings.Contains(p.Model, "/") {
			r.Add(fmt.Sprintf("prices[%d].model", i), fmt.Sprintf("%q is not a model; write it as the agents do, e.g. openai/gpt-4o-mini", p.Model))
		}
		if p.Input < 0 || p.Output < 0 {
			r.Add(fmt.Sprintf("prices[%d]", i), "prices must not be negative")
		}
	}
}
