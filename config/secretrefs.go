package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/config/section"
	"github.com/parleyd/parley/internal/lazyregexp"
)

// Secrets says where the secrets store's key comes from when
// PARLEY_SECRET_KEY is not set.
type Secrets struct {
	// KeyFile is a file holding the key in base64, as parley secrets
	// keygen prints it; readable by parley only.
	KeyFile string `yaml:"key_file"`
}

// SetDefaults trims the key file's path.
func (s *Secrets) SetDefaults(section.Set) { s.KeyFile = strings.TrimSpace(s.KeyFile) }

// secretRefPrefix starts a reference to a stored secret: ${secret:NAME}.
const secretRefPrefix = "${secret:"

// secretRefName is what a secret may be called (vault.CheckName says the
// same).
var secretRefName = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// secretRef matches one reference.
var secretRef = lazyregexp.New(`\$\{secret:([^}]*)\}`)

// SecretRef is a ${secret:NAME} in a config value.
type SecretRef struct {
	Key  string // the key path, e.g. "mcp.servers[0].headers[0]"
	Name string // the secret's name
}

// SecretRefs lists every ${secret:NAME} in the config's values, in the
// order of the Config struct.
func (c *Config) SecretRefs() []SecretRef {
	var out []SecretRef
	c.walkStrings(func(path, s string) (string, bool) {
		if !strings.Contains(s, secretRefPrefix) {
			return s, false // most values: no regexp compiled to say so
		}
		for _, m := range secretRef.FindAllStringSubmatch(s, -1) {
			out = append(out, SecretRef{Key: path, Name: m[1]})
		}
		return s, false
	})
	return out
}

// ResolveSecrets replaces each ${secret:NAME} in the config's values with
// what lookup returns for NAME, as the daemon does when it builds. Every
// reference that can't be resolved is a Problem naming the key and the
// secret (never its value); then nothing is replaced. A resolved API
// token, callback secret or hook secret that is too weak is a problem too.
func (c *Config) ResolveSecrets(lookup func(name string) (string, error)) error {
	var ps Problems
	values := map[string]string{}
	for _, r := range c.SecretRefs() {
		if _, done := values[r.Name]; done {
			continue
		}
		v, err := lookup(r.Name)
		if err != nil {
			ps = append(ps, c.Problem(r.Key, fmt.Sprintf("${secret:%s} can't be resolved: %v", r.Name, err)))
			values[r.Name] = ""
			continue
		}
		values[r.Name] = v
	}
	if len(ps) > 0 {
		return ps
	}
	c.walkStrings(func(_ string, s string) (string, bool) {
		if !strings.Contains(s, secretRefPrefix) {
			return s, false
		}
		return secretRef.ReplaceAllStringFunc(s, func(ref string) string {
			return values[ref[len(secretRefPrefix):len(ref)-1]]
		}), true
	})
	if ps := c.weakResolvedSecrets(); len(ps) > 0 {
		return ps
	}
	r := &resolvedSecrets{}
	for _, v := range values {
		r.values = append(r.values, v)
	}
	c.resolved = r
	return nil
}

// SecretValues are the values ResolveSecrets put in place of references:
// what must be hidden wherever text leaves parley.
func (c *Config) SecretValues() []string {
	if c.resolved == nil {
		return nil
	}
	return slices.Clone(c.resolved.values)
}

// weakResolvedSecrets checks, once stored secrets are in place, the
// secrets parse checks for strength: the API tokens, the callback secret
// and the hooks' secrets.
func (c *Config) weakResolvedSecrets() Problems {
	ck := &checker{file: c.file, lines: c.lines, badRef: map[string]bool{}}
	for i, t := range c.HTTP.Tokens {
		if msg := weakSecret(t.Reveal(), "PARLEY_API_TOKEN"); msg != "" {
			ck.add(fmt.Sprintf("http.tokens[%d]", i), msg)
		}
	}
	if cs := c.HTTP.CallbackSecret.Reveal(); cs != "" {
		if msg := weakSecret(cs, "PARLEY_CALLBACK_SECRET"); msg != "" {
			ck.add("http.callback_secret", msg)
		}
	}
	for i, h := range c.Hooks {
		if h.Secret != "" {
			if msg := weakSecret(h.Secret.Reveal(), "CI_HOOK_SECRET"); msg != "" {
				ck.add(fmt.Sprintf("hooks[%d].secret", i), msg)
			}
		}
	}
	return ck.problems
}

// walkStrings calls fn with every text value in the config and its key
// path, an adapter's own keys included; when fn says so, the value is
// replaced by what it returns.
func (c *Config) walkStrings(fn func(path, s string) (string, bool)) {
	walkValue(reflect.ValueOf(c).Elem(), "", fn)
}

var adapterPtrType = reflect.TypeFor[*Adapter]()

func walkValue(v reflect.Value, path string, fn func(path, s string) (string, bool)) {
	switch v.Kind() {
	case reflect.String:
		if s, replace := fn(path, v.String()); replace && v.CanSet() {
			v.SetString(s)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			walkValue(v.Elem(), path, fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		// Map values can't be set in place: each is copied, walked and
		// stored back, in key order so problems come in a stable order.
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			walkValue(e, joinKey(path, k.String()), fn)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			name, ok := yamlName(t.Field(i))
			if !ok {
				continue
			}
			walkValue(v.Field(i), joinKey(path, name), fn)
		}
		if v.CanAddr() && v.Addr().Type() == adapterPtrType {
			if a := v.Addr().Interface().(*Adapter); a.rest != nil {
				walkNode(a.rest, path, fn)
			}
		}
	}
}

func walkNode(n *yaml.Node, path string, fn func(path, s string) (string, bool)) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkNode(n.Content[i+1], joinKey(path, n.Content[i].Value), fn)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			walkNode(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case yaml.ScalarNode:
		if s, replace := fn(path, n.Value); replace {
			n.Value = s
		}
	}
}

// checkSecretRef checks the reference in "${secret:...}" text starting at
// s[i:], returning its length; it is an error where a secret can't be.
func checkSecretRef(s string, i int) (int, error) {
	end := strings.IndexByte(s[i:], '}')
	if end < 0 {
		return 0, fmt.Errorf(`"${secret:" has no closing "}"; write ${secret:NAME}`)
	}
	name := s[i+len(secretRefPrefix) : i+end]
	if !secretRefName.MatchString(name) {
		return 0, fmt.Errorf("%q is not a secret name; use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit, as in ${secret:github_token}", name)
	}
	return end + 1, nil
}

// noSecretRefs reports the keys that can't refer to a stored secret:
// those read before the secrets store can be opened.
func (c *Config) noSecretRefs(ck *checker) {
	for _, k := range []struct{ key, value, why string }{
		{"database.url", string(c.Database.URL), "the secrets are kept in the database"},
		{"secrets.key_file", c.Secrets.KeyFile, "it says where the secrets' key is"},
	} {
		if strings.Contains(k.value, secretRefPrefix) {
			ck.add(k.key, "can't use ${secret:...}: "+k.why+"; use an environment variable, ${NAME}, instead")
		}
	}
}

// UsesSecrets reports whether the entry's own keys refer to a stored
// secret: they can be checked only once it is resolved.
func (a Adapter) UsesSecrets() bool {
	found := false
	if a.rest != nil {
		walkNode(a.rest, "", func(_, s string) (string, bool) {
			found = found || strings.Contains(s, secretRefPrefix)
			return s, false
		})
	}
	return found
}
