package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/permissions"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech"
	"github.com/parleyd/parley/telemetry"
)

var (
	defaulterType = reflect.TypeFor[section.Defaulter]()
	checkerType   = reflect.TypeFor[section.Checker]()
)

// isSectionType says whether t, or a pointer to it, declares defaults or
// checks.
func isSectionType(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(defaulterType) || p.Implements(checkerType)
}

// TestWalkReachesEverySection fails when a type that declares its
// defaults or checks sits where walkDefaults and walkChecks never go:
// below a map's values, behind a pointer, or in a field the file has no
// key for. Such a section's defaults would silently not apply.
func TestWalkReachesEverySection(t *testing.T) {
	// reached is every section type met, true when the walk calls it
	// wherever it is.
	reached := map[reflect.Type]bool{}
	type visit1 struct {
		t      reflect.Type
		walked bool
	}
	done := map[visit1]bool{}
	var visit func(t reflect.Type, walked bool)
	visit = func(t reflect.Type, walked bool) {
		if done[visit1{t, walked}] {
			return
		}
		done[visit1{t, walked}] = true
		if isSectionType(t) {
			ok, met := reached[t]
			reached[t] = walked && (ok || !met)
		}
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				visit(f.Type, walked && keyName(f) != "")
			}
		case reflect.Slice, reflect.Array:
			visit(t.Elem(), walked)
		case reflect.Map, reflect.Pointer:
			// The walk stops here: a map-typed section defaults and checks
			// its own entries.
			visit(t.Elem(), false)
		}
	}
	visit(reflect.TypeFor[Config](), true)
	for typ, ok := range reached {
		if !ok {
			t.Errorf("%s declares its defaults or checks, but the walk over Config never reaches it; "+
				"put it in a field with a key or a list, or have the section above call it", typ)
		}
	}
	// The sections each package owns, and the nested ones, are among
	// those reached.
	for _, want := range []reflect.Type{
		reflect.TypeFor[speech.Config](), reflect.TypeFor[telemetry.Config](), reflect.TypeFor[Compaction](),
		reflect.TypeFor[History](), reflect.TypeFor[AgentImages](), reflect.TypeFor[SessionSQL](),
		reflect.TypeFor[MCPServer](), reflect.TypeFor[SessionHook](), reflect.TypeFor[llm.ProvidersConfig](),
	} {
		if !reached[want] {
			t.Errorf("%s is not reached by the walk", want)
		}
	}
}

// TestSectionDefaults: each section's defaults reach the config, in a
// section at the top, nested in one, and in a list's entries, and an
// explicit value is kept.
func TestSectionDefaults(t *testing.T) {
	d := Default()
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"speech.timeout", d.Speech.Timeout.Std(), speech.DefaultTimeout},
		{"speech.voice_model", d.Speech.VoiceModel, speech.DefaultSpeechModel},
		{"telemetry.sample_ratio", d.Telemetry.SampleRatio, telemetry.DefaultSampleRatio},
		{"agents[0].history.cron", d.Agents[0].History.Cron, sessions.DefaultHistoryTurns(sessions.SurfaceCron)},
		{"agents[0].history.channels", d.Agents[0].History.Channels, 30},
		{"agents[0].compaction.tail_turns", d.Agents[0].Compaction.TailTurns, DefaultTailTurns},
		{"agents[0].images.max_per_turn", d.Agents[0].Images.MaxPerTurn, DefaultMaxImagesPerTurn},
		{"sessions.sql.max_rows", d.Sessions.SQL.MaxRows, DefaultSQLMaxRows},
		{"sessions.kv.max_keys", d.Sessions.KV.MaxKeys, DefaultKVMaxKeys},
		{"database.sqlite.busy_timeout", d.Database.SQLite.BusyTimeout.Std(), dbutil.DefaultBusyTimeout},
		{"permissions.ask_timeout", d.Permissions.AskTimeout, Duration(permissions.DefaultAskTimeout)},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("Default: %s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}

	c := mustParse(t, `
agents:
  - id: a
  - id: b
    history: {cron: 3}
    compaction: {tail_turns: 4}
providers:
  openai: {api_key: sk-test}
mcp:
  servers:
    - id: fs
      command: mcp-fs
      tool_retry: [{tool: read}]
hooks:
  - id: ci
    auth: token
    secret: 0123456789abcdef0123456789abcdef
    prompt: hi
speech:
  base_url: http://127.0.0.1:8000/v1/
  max_seconds: 30
`, nil)
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"agents[1].history.cron", c.Agents[1].History.Cron, 3},
		{"agents[1].history.webhook", c.Agents[1].History.Webhook, sessions.DefaultHistoryTurns(sessions.SurfaceWebhook)},
		{"agents[0].compaction.tail_turns", c.Agents[0].Compaction.TailTurns, DefaultTailTurns},
		{"agents[1].compaction.tail_turns", c.Agents[1].Compaction.TailTurns, 4},
		{"agents[1].compaction.threshold", c.Agents[1].Compaction.Threshold, DefaultCompactionThreshold},
		{"providers.openai.timeouts.total", c.Providers["openai"].Timeouts.Total.Std(), llm.DefaultTimeouts.Total},
		{"mcp.servers[0].timeout", c.MCP.Servers[0].Timeout, DefaultMCPTimeout},
		{"mcp.servers[0].tool_retry[0].attempts", c.MCP.Servers[0].ToolRetry[0].Attempts, DefaultRetryAttempts},
		{"hooks[0].agent", c.Hooks[0].Agent, "a"},
		{"hooks[0].timeout", c.Hooks[0].Timeout.Std(), DefaultHookTimeout},
		{"speech.base_url", c.Speech.BaseURL, "http://127.0.0.1:8000/v1"},
		{"speech.max_seconds", c.Speech.MaxSeconds, 30},
		{"speech.max_bytes", c.Speech.MaxBytes, speech.DefaultMaxBytes},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}

	// An explicit 0 is the file's, and checked, not replaced.
	ps := problemsOf(t, parseErr("speech:\n  max_seconds: 0\nagents:\n  - id: a\n    history: {cli: 0}\n"))
	for _, want := range []string{"parley.yaml:2: speech.max_seconds: 0 is out of range", "parley.yaml:5: agents[0].history.cli: 0 is too small"} {
		if !strings.Contains(ps.Error(), want) {
			t.Errorf("problems:\n%v\nwant one starting %q", ps, want)
		}
	}
}

func parseErr(src string) error {
	_, err := Parse([]byte(src), testFile, nil)
	return err
}

// walkProbe is a section that records what the walk gave it.
type walkProbe struct {
	N    int         `yaml:"n"`
	Kids []walkProbe `yaml:"kids"`
	Skip *walkProbe  `yaml:"-"`
	seen *[]string
}

func (p *walkProbe) SetDefaults(set section.Set) {
	if set.Has("n") {
		*p.seen = append(*p.seen, "set")
	}
	section.Default(&p.N, set, "n", 7)
	for i := range p.Kids {
		p.Kids[i].seen = p.seen
	}
}

func (p walkProbe) Check(r section.Reporter) {
	if p.N > 10 {
		r.Add("n", "too big")
	}
}

// The walk calls a section before the sections within it, at each one's
// own path, and reports their problems at their full keys.
func TestWalkPaths(t *testing.T) {
	var seen []string
	root := struct {
		Top walkProbe `yaml:"top"`
	}{Top: walkProbe{Kids: []walkProbe{{}, {N: 11}, {}}}}
	root.Top.seen = &seen
	has := map[string]bool{"top.kids[2].n": true}
	walkDefaults(reflect.ValueOf(&root).Elem(), "", func(k string) bool { return has[k] })
	if got := []int{root.Top.N, root.Top.Kids[0].N, root.Top.Kids[1].N, root.Top.Kids[2].N}; !slices.Equal(got, []int{7, 7, 11, 0}) {
		t.Errorf("defaults %v, want [7 7 11 0] (an explicit 0 kept)", got)
	}
	if !slices.Equal(seen, []string{"set"}) {
		t.Errorf("Set.Has answered %v, want [set] for top.kids[2].n alone", seen)
	}
	var l section.List
	walkChecks(reflect.ValueOf(&root).Elem(), "", &l)
	if want := []string{"top.kids[1].n"}; !slices.Equal(l.Keys(), want) {
		t.Errorf("problems at %v, want %v", l.Keys(), want)
	}
}
