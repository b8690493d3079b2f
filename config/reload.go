package config

import (
	"reflect"
	"slices"
	"strings"
)

// ReloadClass says what a reload does with a key.
type ReloadClass int

const (
	// ReloadLive keys are applied by a reload to the messages taken from
	// then on.
	ReloadLive ReloadClass = iota
	// ReloadRestart keys change only at a restart: a reload that changes
	// one is refused whole.
	ReloadRestart
)

// ReloadKeys classes every config key, by its path in the file or the
// path of a section it is in (the longest one that matches decides). A
// key in no entry is a defect that TestReloadClassesEveryKey finds.
var ReloadKeys = map[string]ReloadClass{
	"database":                      ReloadRestart,
	"http.listen":                   ReloadRestart,
	"http.ops_listen":               ReloadRestart,
	"http.tokens":                   ReloadRestart,
	"http.callback_secret":          ReloadRestart,
	"http.event_log_mb":             ReloadLive,
	"http.max_title_chars":          ReloadLive,
	"http.max_metadata_bytes":       ReloadLive,
	"http.callback_allow":           ReloadLive,
	"http.mcp":                      ReloadLive,
	"http.trusted_proxies":          ReloadRestart,
	"log":                           ReloadRestart,
	"agents":                        ReloadLive,
	"providers":                     ReloadRestart,
	"gateway":                       ReloadRestart,
	"bindings":                      ReloadLive,
	"memory":                        ReloadRestart,
	"adapters":                      ReloadRestart, // but for their access keys: AdapterAccessKeys
	"hooks":                         ReloadLive,
	"mcp":                           ReloadLive,
	"budgets":                       ReloadLive,
	"cron":                          ReloadLive,
	"permissions":                   ReloadLive,
	"sessions.prune_archived_after": ReloadLive,
	"sessions.kv":                   ReloadLive,
	"sessions.client_tools":         ReloadLive,
	"sessions.files":                ReloadLive,
	"sessions.sql":                  ReloadLive,
	"session_hooks":                 ReloadLive,
	"harnesses":                     ReloadLive,
	"skills":                        ReloadLive,
	"secrets":                       ReloadRestart,
	"speech":                        ReloadRestart,
	"telemetry":                     ReloadRestart,
}

// AdapterAccessKeys are the keys of a channel's entry a reload applies:
// who may talk to the bot, and how a message taken is acknowledged. The
// rest of the entry (its type, token and settings) changes only at a
// restart.
var AdapterAccessKeys = []string{"dm_policy", "group_policy", "allow", "groups", "ack_reaction"}

// ClassOf is the reload class of the key at path.
func ClassOf(path string) (ReloadClass, bool) {
	for p := path; p != ""; {
		if c, ok := ReloadKeys[p]; ok {
			return c, true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ReloadRestart, false
}

// RestartOnly names the keys that differ between old and cfg but change
// only at a restart; a key no entry of ReloadKeys classes counts as one.
func RestartOnly(old, cfg *Config) []string {
	var out []string
	for _, k := range changedKeys(reflect.ValueOf(*old), reflect.ValueOf(*cfg), "") {
		if c, _ := ClassOf(k); c == ReloadRestart {
			out = append(out, k)
		}
	}
	if !sameChannels(old, cfg) {
		out = append(out, channelChanges(old, cfg)...)
	}
	return out
}

// changedKeys lists the paths of the keys that differ between a and b
// (values of one struct type): a struct section is walked key by key, a
// list or map is one key. Channels are compared apart (channelChanges).
func changedKeys(a, b reflect.Value, prefix string) []string {
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := keyName(f)
		if name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if path == "adapters" {
			continue
		}
		fa, fb := a.Field(i), b.Field(i)
		if isSection(f.Type) {
			out = append(out, changedKeys(fa, fb, path)...)
		} else if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			out = append(out, path)
		}
	}
	return out
}

// Keys lists the path of every key of the config's type, as
// changedKeys names them: what ReloadKeys must class.
func Keys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := keyName(f)
		if name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if isSection(f.Type) {
			out = append(out, Keys(f.Type, path)...)
		} else {
			out = append(out, path)
		}
	}
	return out
}

// keyName is a field's key in the file; "" for a field the file doesn't
// set.
func keyName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

// isSection says whether a field's type is a section of keys (walked key
// by key) rather than one value.
func isSection(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	switch t {
	case reflect.TypeFor[Duration](), reflect.TypeFor[Secret](), reflect.TypeFor[DSN]():
		return false
	}
	return true
}

// sameChannels says whether the channels are the same but for their access
// keys, which change live.
func sameChannels(old, cfg *Config) bool {
	return len(channelChanges(old, cfg)) == 0
}

// channelChanges names the channels whose entries differ in more than
// their access keys, and those added or removed.
func channelChanges(old, cfg *Config) []string {
	var out []string
	byID := map[string]Adapter{}
	for _, a := range cfg.Adapters {
		byID[a.ID] = a
	}
	for _, a := range old.Adapters {
		b, ok := byID[a.ID]
		switch {
		case !ok:
			out = append(out, "adapters."+a.ID+" (removed)")
		case a.Type != b.Type || a.Stream != b.Stream || a.Workspace != b.Workspace || !a.SameSettings(b):
			out = append(out, "adapters."+a.ID)
		}
		delete(byID, a.ID)
	}
	for _, a := range cfg.Adapters {
		if _, ok := byID[a.ID]; ok {
			out = append(out, "adapters."+a.ID+" (added)")
		}
	}
	slices.Sort(out)
	return out
}
