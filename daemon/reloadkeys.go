package daemon

import (
	"reflect"
	"slices"
	"strings"

	"github.com/parleyd/parley/config"
)

// reloadClass says what a reload does with a key.
type reloadClass int

const (
	// reloadLive keys are applied by a reload to the messages taken from
	// then on.
	reloadLive reloadClass = iota
	// reloadRestart keys change only at a restart: a reload that changes
	// one is refused whole.
	reloadRestart
)

// reloadKeys classes every config key, by its path in the file or the
// path of a section it is in (the longest one that matches decides). A
// key in no entry is a defect that TestReloadClassesEveryKey finds.
var reloadKeys = map[string]reloadClass{
	"database":                      reloadRestart,
	"http.listen":                   reloadRestart,
	"http.ops_listen":               reloadRestart,
	"http.tokens":                   reloadRestart,
	"http.callback_secret":          reloadRestart,
	"http.event_log_mb":             reloadLive,
	"http.max_title_chars":          reloadLive,
	"http.max_metadata_bytes":       reloadLive,
	"http.callback_allow":           reloadLive,
	"http.mcp":                      reloadLive,
	"log":                           reloadRestart,
	"agents":                        reloadLive,
	"providers":                     reloadRestart,
	"gateway":                       reloadRestart,
	"bindings":                      reloadLive,
	"memory":                        reloadRestart,
	"adapters":                      reloadRestart, // but for their access keys: adapterAccessKeys
	"hooks":                         reloadLive,
	"mcp":                           reloadLive,
	"budgets":                       reloadLive,
	"cron":                          reloadLive,
	"permissions":                   reloadLive,
	"sessions.prune_archived_after": reloadLive,
	"sessions.kv":                   reloadLive,
	"sessions.client_tools":         reloadLive,
	"skills":                        reloadLive,
	"secrets":                       reloadRestart,
}

// adapterAccessKeys are the keys of a channel's entry a reload applies:
// who may talk to the bot. The rest of the entry (its type, token and
// settings) changes only at a restart.
var adapterAccessKeys = []string{"dm_policy", "group_policy", "allow", "groups"}

// classOf is the reload class of the key at path.
func classOf(path string) (reloadClass, bool) {
	for p := path; p != ""; {
		if c, ok := reloadKeys[p]; ok {
			return c, true
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return reloadRestart, false
}

// restartOnly names the keys that differ between old and cfg but change
// only at a restart; a key no entry of reloadKeys classes counts as one.
func restartOnly(old, cfg *config.Config) []string {
	var out []string
	for _, k := range changedKeys(reflect.ValueOf(*old), reflect.ValueOf(*cfg), "") {
		if c, _ := classOf(k); c == reloadRestart {
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
		name := yamlName(f)
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

// configKeys lists the path of every key of the config's type, as
// changedKeys names them: what reloadKeys must class.
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if isSection(f.Type) {
			out = append(out, configKeys(f.Type, path)...)
		} else {
			out = append(out, path)
		}
	}
	return out
}

// yamlName is a field's key in the file; "" for a field the file doesn't
// set.
func yamlName(f reflect.StructField) string {
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
	case reflect.TypeFor[config.Duration](), reflect.TypeFor[config.Secret](), reflect.TypeFor[config.DSN]():
		return false
	}
	return true
}

// sameChannels says whether the channels are the same but for their access
// keys, which change live.
func sameChannels(old, cfg *config.Config) bool {
	return len(channelChanges(old, cfg)) == 0
}

// channelChanges names the channels whose entries differ in more than
// their access keys, and those added or removed.
func channelChanges(old, cfg *config.Config) []string {
	var out []string
	byID := map[string]config.Adapter{}
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
