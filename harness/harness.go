// Package harness resolves what a session runs on: its harness (the base
// prompt, tools, capabilities, model and limits, pinned at the version the
// session began with), its session capabilities (tools added for a while),
// and the features they give, which clients read to decide what to show.
//
// A session's metadata names them: "harness": {"id", "version"} and
// "capabilities": [...]. The versions are kept in harness_versions, so a
// harness changed in the config is a new version, and sessions keep theirs.
package harness

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

const (
	pinQuery = `INSERT INTO harness_versions (harness_id, version, spec, created_at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (harness_id, version) DO NOTHING`
	specQuery = `SELECT spec FROM harness_versions WHERE harness_id = $1 AND version = $2`
)

// ErrUnknown means a harness id or a capability names nothing configured.
var ErrUnknown = errors.New("unknown")

// Ref names a harness version, as a session's metadata holds it.
type Ref struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// Version is a harness's version: a digest of its settings.
func Version(h config.Harness) string {
	b, _ := json.Marshal(h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Set resolves harnesses and capabilities over the running config and the
// versions kept in the database.
type Set struct {
	db  *dbutil.DB
	cfg func() *config.Config
}

// New returns the Set over db and cfg.
func New(db *dbutil.DB, cfg func() *config.Config) *Set { return &Set{db: db, cfg: cfg} }

// Pin records the current version of harness id, so a session can keep it,
// and returns its ref; an id the config has no harness for is ErrUnknown.
func (s *Set) Pin(ctx context.Context, id string) (Ref, error) {
	h, ok := s.cfg().Harness(id)
	if !ok {
		return Ref{}, fmt.Errorf("%w harness %q; name one of harnesses[].id in the config", ErrUnknown, id)
	}
	ref := Ref{ID: id, Version: Version(h)}
	spec, err := json.Marshal(h)
	if err != nil {
		return Ref{}, err
	}
	if _, err := s.db.Write().ExecContext(ctx, pinQuery, ref.ID, ref.Version, string(spec), dbutil.Millis(timeNow())); err != nil {
		return Ref{}, fmt.Errorf("record harness %s version %s: %w", ref.ID, ref.Version, err)
	}
	return ref, nil
}

// Get is the harness version ref names, as it was pinned.
func (s *Set) Get(ctx context.Context, ref Ref) (config.Harness, error) {
	var spec string
	err := s.db.Read().QueryRowContext(ctx, specQuery, ref.ID, ref.Version).Scan(&spec)
	if errors.Is(err, sql.ErrNoRows) {
		return config.Harness{}, fmt.Errorf("%w harness version %s@%s", ErrUnknown, ref.ID, ref.Version)
	}
	if err != nil {
		return config.Harness{}, err
	}
	var h config.Harness
	return h, json.Unmarshal([]byte(spec), &h)
}

// CheckCapabilities says which of names are not capabilities, naming them
// all; nil when each is one.
func (s *Set) CheckCapabilities(names []string) error {
	cfg := s.cfg()
	var bad []string
	for _, n := range names {
		if msg := cfg.CapabilityProblem(n); msg != "" {
			bad = append(bad, msg)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w capabilities: %s", ErrUnknown, strings.Join(bad, "; "))
	}
	return nil
}

// Of is the harness ref and session capabilities a session's metadata
// names.
func Of(meta json.RawMessage) (ref Ref, caps []string) {
	var m struct {
		Harness      Ref      `json:"harness"`
		Capabilities []string `json:"capabilities"`
	}
	_ = json.Unmarshal(meta, &m)
	return m.Harness, m.Capabilities
}

// CapabilityTools are the tool names capability gives: a built-in group's
// tools, or "mcp:<server>" (every tool of the server, expanded when a turn
// starts).
func CapabilityTools(capability string) []string {
	if strings.HasPrefix(capability, "mcp:") {
		return []string{capability}
	}
	group, ok := config.BuiltinCapabilities[capability]
	if !ok {
		return nil
	}
	names, _ := tools.BuiltinGroup(group)
	return names
}

// Resolved is what a session's turns run with beyond its agent.
type Resolved struct {
	Harness      *config.Harness
	Capabilities []string // the harness's and the session's, deduplicated
}

// Resolve reads what session s runs on: its pinned harness and its
// capabilities. A session without a harness has none; a pinned version
// missing from the database is an error.
func (s *Set) Resolve(ctx context.Context, sess sessions.Session) (Resolved, error) {
	ref, caps := Of(sess.Metadata)
	var r Resolved
	if ref.ID != "" {
		h, err := s.Get(ctx, ref)
		if err != nil {
			return Resolved{}, err
		}
		r.Harness = &h
		caps = append(slices.Clone(h.Capabilities), caps...)
	}
	seen := map[string]bool{}
	for _, c := range caps {
		if !seen[c] {
			seen[c] = true
			r.Capabilities = append(r.Capabilities, c)
		}
	}
	return r, nil
}

// Features are what a session can do, for clients: the capabilities its
// harness, its own and its agent's tools give (memory, kv, files, sql,
// schedules, subagents, mcp:<server>), "vision" when its agent's model
// sees images, and "harness:<id>" for its harness.
func (s *Set) Features(ctx context.Context, sess sessions.Session) []string {
	r, _ := s.Resolve(ctx, sess)
	set := map[string]bool{}
	for _, c := range r.Capabilities {
		set[c] = true
	}
	if r.Harness != nil {
		set["harness:"+r.Harness.ID] = true
	}
	cfg := s.cfg()
	a, _ := cfg.Agent(sess.Key.AgentID)
	toolNames := slices.Clone(a.Tools)
	if r.Harness != nil {
		toolNames = append(toolNames, r.Harness.Tools...)
	}
	for _, t := range toolNames {
		if strings.HasPrefix(t, "mcp:") {
			server, _, _ := strings.Cut(strings.TrimPrefix(t, "mcp:"), "/")
			set["mcp:"+server] = true
			continue
		}
		for capability := range config.BuiltinCapabilities {
			if slices.Contains(CapabilityTools(capability), t) {
				set[capability] = true
			}
		}
	}
	if a.Vision {
		set["vision"] = true
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// timeNow is the clock harness versions are stamped with.
var timeNow = time.Now
