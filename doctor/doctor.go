// Package doctor checks a parley config against the world it will run in:
// the config itself, the database, each provider key, each channel's token,
// the MCP servers and the clock. Each finding says what to do. It runs
// nothing of the daemon's and changes nothing.
package doctor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/tools"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/migrations"
	"github.com/parleyd/parley/runfile"
	"github.com/parleyd/parley/turns"
)

// A Finding is one check of `parley doctor`: what was checked, how it
// went, and what to do when it didn't.
type Finding struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok, warn or fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// The statuses of a finding.
const (
	FindingOK   = "ok"
	FindingWarn = "warn"
	FindingFail = "fail"
)

// checkTimeout bounds each check that goes over the network.
const checkTimeout = 10 * time.Second

// Doctor checks what parley needs to run on cfg, without starting it: the
// config, the database (reachable, its schema, free space), each provider
// key (a one-token call of an agent's model), each channel's credentials,
// the webhooks' public address, and the clock (against the Date of the
// answers). cfg may hold problems (config.LoadForCheck): they are the first
// findings.
func Doctor(ctx context.Context, cfg *config.Config, configErr error) []Finding {
	var out []Finding
	add := func(check, status, detail, fix string) {
		out = append(out, Finding{Check: check, Status: status, Detail: detail, Fix: fix})
	}
	switch problems := errors.Join(configErr, daemon.Check(cfg)); {
	case problems != nil:
		add("config", FindingFail, problems.Error(), "fix the lines named; parley config check lists them too")
	default:
		add("config", FindingOK, fmt.Sprintf("%d agent(s), %d channel(s), %d hook(s), %d cron job(s)",
			len(cfg.Agents), len(cfg.Adapters), len(cfg.Hooks), len(cfg.Cron.Jobs)), "")
	}
	out = append(out, doctorDatabase(ctx, cfg)...)
	out = append(out, doctorPorts(cfg)...)
	var dates []time.Time
	provider, d := doctorProviders(ctx, cfg)
	out, dates = append(out, provider...), append(dates, d...)
	out = append(out, doctorChannels(ctx, cfg)...)
	out = append(out, doctorMCP(ctx, cfg)...)
	if f, ok := doctorClock(dates); ok {
		out = append(out, f)
	}
	return out
}

// databaseWhere names the configured database without its password: the
// SQLite file's path, or PostgreSQL's host and database.
func databaseWhere(cfg *config.Config) string {
	t, err := dbutil.ParseURL(cfg.Database.URL.Reveal())
	switch {
	case err != nil:
		return "database.url"
	case t.Dialect == dbutil.SQLite:
		return t.Path
	}
	u, err := url.Parse(t.URL)
	if err != nil {
		return "the PostgreSQL database in database.url"
	}
	return u.Host + u.Path
}

func doctorDatabase(ctx context.Context, cfg *config.Config) []Finding {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	where := databaseWhere(cfg)
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		if _, err := os.Stat(t.Path); errors.Is(err, fs.ErrNotExist) {
			// Not created here: a check changes nothing.
			return []Finding{{Check: "database", Status: FindingOK, Detail: "no database at " + t.Path + " yet; parley run creates it"}}
		}
	}
	db, err := daemon.Dial(ctx, cfg)
	if err != nil {
		return []Finding{{Check: "database", Status: FindingFail, Detail: where + ": " + err.Error(),
			Fix: "check database.url; for PostgreSQL, that the server runs and the user may connect"}}
	}
	defer db.Close()
	out := []Finding{}
	latest, _ := migrations.Latest(db.Dialect)
	v, err := migrations.Version(ctx, db)
	switch {
	case err != nil:
		out = append(out, Finding{Check: "database", Status: FindingFail, Detail: where + ": can't read the schema version: " + err.Error(),
			Fix: "check the database user's rights"})
	case v > latest:
		out = append(out, Finding{Check: "database", Status: FindingFail,
			Detail: fmt.Sprintf("%s at %s: schema version %d is newer than this parley knows (%d)", db.Dialect, where, v, latest),
			Fix:    "run the newer parley that migrated it, or restore a backup taken before"})
	case v < latest:
		out = append(out, Finding{Check: "database", Status: FindingWarn,
			Detail: fmt.Sprintf("%s at %s reachable; schema version %d, this parley's is %d", db.Dialect, where, v, latest),
			Fix:    "parley run migrates at start; or run parley migrate now"})
	default:
		out = append(out, Finding{Check: "database", Status: FindingOK, Detail: fmt.Sprintf("%s at %s reachable; schema version %d (current)", db.Dialect, where, v)})
	}
	if t, err := dbutil.ParseURL(cfg.Database.URL.Reveal()); err == nil && t.Dialect == dbutil.SQLite {
		dir := filepath.Dir(t.Path)
		free, err := httpserve.DiskFree(dir)
		minFree := uint64(cfg.Database.SQLite.MinFreeMB) << 20
		switch {
		case err != nil:
			out = append(out, Finding{Check: "disk", Status: FindingWarn, Detail: err.Error()})
		case free < minFree:
			out = append(out, Finding{Check: "disk", Status: FindingFail,
				Detail: fmt.Sprintf("%d MiB free beside the database, under database.sqlite.min_free_mb (%d): /readyz says not ready", free>>20, minFree>>20),
				Fix:    "free space on that filesystem, or move the database"})
		case free < 4*minFree:
			out = append(out, Finding{Check: "disk", Status: FindingWarn, Detail: fmt.Sprintf("%d MiB free beside the database", free>>20),
				Fix: "free space soon: under database.sqlite.min_free_mb parley stops being ready"})
		default:
			out = append(out, Finding{Check: "disk", Status: FindingOK, Detail: fmt.Sprintf("%d MiB free beside the database", free>>20)})
		}
	}
	return out
}

// doctorProviders makes one one-token call per configured provider, with
// the first agent's model on it, and warns of agents with no key.
func doctorProviders(ctx context.Context, cfg *config.Config) ([]Finding, []time.Time) {
	var out []Finding
	var dates []time.Time
	for _, id := range cfg.MissingKeys() {
		a, _ := cfg.Agent(id)
		provider, _, _ := llm.ParseModel(a.Model)
		out = append(out, Finding{Check: "agent " + id, Status: FindingFail,
			Detail: fmt.Sprintf("model %s has no API key: every chat with this agent is told the assistant isn't configured", a.Model),
			Fix:    fmt.Sprintf("set providers.%s.api_key (or base_url, for a local server), or give the agent a model whose provider has one", provider)})
	}
	open := turns.Models(cfg)
	tried := map[string]bool{}
	for _, a := range cfg.Agents {
		provider, name, err := llm.ParseModel(a.Model)
		if err != nil || provider == "echo" || tried[provider] {
			continue
		}
		m, err := open(a.Model)
		if err != nil {
			continue // reported above
		}
		tried[provider] = true
		if date, ok := serverDate(ctx, providerBase(cfg, provider)); ok {
			dates = append(dates, date)
		}
		if err := CheckModel(ctx, m, name); err != nil {
			out = append(out, Finding{Check: "provider " + provider, Status: FindingFail, Detail: err.Error(),
				Fix: fmt.Sprintf("check providers.%s.api_key and base_url, and that %s is a model the key may use", provider, name)})
			continue
		}
		out = append(out, Finding{Check: "provider " + provider, Status: FindingOK, Detail: a.Model + " answered a one-token call"})
	}
	return out, dates
}

// CheckModel makes a one-token call of model name, which tells whether the
// key and the model name work.
func CheckModel(ctx context.Context, m llm.Model, name string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	_, err := m.Stream(ctx, llm.Request{Model: name, MaxTokens: 1,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Say ok."}}}, func(llm.Delta) {})
	return err
}

// providerBase is the address a provider is reached at.
func providerBase(cfg *config.Config, provider string) string {
	p, ok := llm.Lookup(provider)
	if !ok {
		return ""
	}
	return cmp.Or(cfg.Providers[provider].BaseURL, p.DefaultBaseURL)
}

// serverDate is the Date a server at url answers a HEAD with.
func serverDate(ctx context.Context, url string) (time.Time, bool) {
	if url == "" {
		return time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return time.Time{}, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Time{}, false
	}
	resp.Body.Close()
	t, err := http.ParseTime(resp.Header.Get("Date"))
	return t, err == nil
}

// doctorChannels asks each channel that can tell whether its credentials
// work.
func doctorChannels(ctx context.Context, cfg *config.Config) []Finding {
	var out []Finding
	chans, err := adapters.Checked(cfg)
	if err != nil && len(chans) == 0 && len(cfg.Adapters) > 0 {
		return out // the config finding says why
	}
	for _, a := range cfg.Adapters {
		ad, ok := chans[adapters.ID(a.ID)]
		check := "channel " + a.ID
		switch {
		case !ok:
			out = append(out, Finding{Check: check, Status: FindingWarn, Detail: a.Type + " channel skipped: no credentials",
				Fix: "set its token (or link it: parley whatsapp link) to use it"})
			continue
		}
		c := adapters.CapabilitiesOf(ad).Check
		if c == nil {
			out = append(out, Finding{Check: check, Status: FindingOK, Detail: a.Type + " configured (no online check for this type)"})
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, checkTimeout)
		who, err := c.Check(cctx)
		cancel()
		if err != nil {
			out = append(out, Finding{Check: check, Status: FindingFail, Detail: err.Error(), Fix: "fix the channel's token in the config"})
			continue
		}
		out = append(out, Finding{Check: check, Status: FindingOK, Detail: a.Type + " accepts the token: " + who})
	}
	return out
}

// doctorClock compares this machine's clock with the Date headers the
// providers answered with: signed webhooks, tokens and cron need it right.
func doctorClock(dates []time.Time) (Finding, bool) {
	if len(dates) == 0 {
		return Finding{}, false
	}
	skew := time.Since(dates[0])
	if skew < 0 {
		skew = -skew
	}
	// A Date header has whole seconds, and the call took some time.
	switch {
	case skew > 5*time.Minute:
		return Finding{Check: "clock", Status: FindingFail, Detail: fmt.Sprintf("%s off the providers' clock", skew.Round(time.Second)),
			Fix: "set the time right (enable NTP: timedatectl set-ntp true); signed webhooks are refused outside a 5-minute window"}, true
	case skew > 30*time.Second:
		return Finding{Check: "clock", Status: FindingWarn, Detail: fmt.Sprintf("%s off the providers' clock", skew.Round(time.Second)),
			Fix: "enable NTP (timedatectl set-ntp true)"}, true
	}
	return Finding{Check: "clock", Status: FindingOK, Detail: "within 30 s of the providers' clock"}, true
}

// CheckChannel builds the channel id of cfg and asks it, when it can tell,
// whether its credentials work: what `parley init` does as each token is
// entered.
func CheckChannel(ctx context.Context, cfg *config.Config, id string) (string, error) {
	chans, err := adapters.Checked(cfg)
	if err != nil {
		return "", err
	}
	ad, ok := chans[adapters.ID(id)]
	if !ok {
		return "", fmt.Errorf("channel %s has no credentials", id)
	}
	c := adapters.CapabilitiesOf(ad).Check
	if c == nil {
		return "configured", nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return c.Check(ctx)
}

// CheckAgentModel makes a one-token call of the model of cfg's agent.
func CheckAgentModel(ctx context.Context, cfg *config.Config, agentID string) error {
	a, ok := cfg.Agent(agentID)
	if !ok {
		return fmt.Errorf("no agent %s", agentID)
	}
	_, name, err := llm.ParseModel(a.Model)
	if err != nil {
		return err
	}
	m, err := turns.Models(cfg)(a.Model)
	if err != nil {
		return err
	}
	return CheckModel(ctx, m, name)
}

// doctorMCP starts each MCP server, lists its tools and stops it.
func doctorMCP(ctx context.Context, cfg *config.Config) []Finding {
	if len(cfg.MCP.Servers) == 0 {
		return nil
	}
	m := mcptools.New(cfg.MCP.Servers, tools.NewRegistry(), slog.New(slog.DiscardHandler))
	m.SetScrubber(secret.NewScrubber(cfg.SecretValues()...))
	defer m.Close()
	m.Start(ctx)
	var out []Finding
	for _, st := range m.Statuses() {
		f := Finding{Check: "mcp " + st.ID, Status: FindingOK, Detail: fmt.Sprintf("%d tool(s): %s", len(st.Tools), strings.Join(st.Tools, ", "))}
		if st.State != mcptools.StateReady {
			f = Finding{Check: "mcp " + st.ID, Status: FindingFail, Detail: st.Error,
				Fix: fmt.Sprintf("check mcp.servers %s: its command (installed, on PATH?) or url, and its env or headers", st.ID)}
		}
		out = append(out, f)
	}
	return out
}

// doctorPorts checks that the addresses parley listens on are free, or
// held by the parley running on this config: taken by anything else,
// parley run would stop at start.
func doctorPorts(cfg *config.Config) []Finding {
	var out []Finding
	running, isRunning := runfile.Read(cfg)
	for _, l := range []struct{ key, addr string }{{"http.listen", cfg.HTTP.Listen}, {"http.ops_listen", cfg.HTTP.OpsListen}} {
		if l.addr == "" {
			continue
		}
		check := "port " + l.key
		ln, err := net.Listen("tcp", l.addr)
		switch {
		case err == nil:
			ln.Close()
			out = append(out, Finding{Check: check, Status: FindingOK, Detail: l.addr + " is free"})
		case isRunning && sameAddr(running.Listen, l.addr):
			out = append(out, Finding{Check: check, Status: FindingOK,
				Detail: fmt.Sprintf("%s is in use by the parley running on this config (pid %d)", l.addr, running.PID)})
		case errors.Is(err, syscall.EADDRINUSE):
			out = append(out, Finding{Check: check, Status: FindingFail,
				Detail: l.addr + " is in use by another program: parley run would stop at start",
				Fix:    "set " + l.key + " to a free address, or stop what listens there (ss -ltnp shows it)"})
		default:
			out = append(out, Finding{Check: check, Status: FindingFail, Detail: fmt.Sprintf("can't listen on %s: %v", l.addr, err),
				Fix: "set " + l.key + " to an address of this host, such as 127.0.0.1:8080"})
		}
	}
	return out
}

// sameAddr reports whether a running daemon's address (as it reported
// it, resolved) is the configured one.
func sameAddr(running, configured string) bool {
	if running == configured {
		return true
	}
	_, rp, err1 := net.SplitHostPort(running)
	_, cp, err2 := net.SplitHostPort(configured)
	return err1 == nil && err2 == nil && rp == cp
}
