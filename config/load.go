package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/internal/lazyregexp"
)

// EnvConfigPath names the environment variable that points at the config
// file when no flag does.
const EnvConfigPath = "PARLEY_CONFIG"

// DefaultPath is the file used when it exists in the working directory and
// neither the flag nor PARLEY_CONFIG names one.
const DefaultPath = "parley.yaml"

// Find picks the config file: flagPath when set, else $PARLEY_CONFIG when
// set, else parley.yaml when it exists in the working directory, else ""
// meaning "no file: use the defaults". explicit reports that the user named
// the file, so it is an error for it to be missing.
func Find(flagPath string) (path string, explicit bool) {
	if flagPath != "" {
		return flagPath, true
	}
	if p, ok := os.LookupEnv(EnvConfigPath); ok && p != "" {
		return p, true
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath, false
	}
	return "", false
}

// LoadOrDefault loads the file Find picks, or returns Default when there is
// none. It also returns the path it loaded, "" for the defaults.
func LoadOrDefault(flagPath string) (*Config, string, error) {
	c, path, err := LoadForCheck(flagPath)
	if err != nil {
		return nil, path, err
	}
	return c, path, nil
}

// LoadForCheck is LoadOrDefault for `parley config check`: the config comes
// back even when it has problems (they are the error, as Problems), so that
// the checks made outside this package (each channel's own keys, cron
// schedules, tool names) can add theirs and every problem is reported at
// once. The config is nil only when the file can't be read or is not YAML.
func LoadForCheck(flagPath string) (*Config, string, error) {
	path, err := find(flagPath)
	if err != nil {
		return nil, path, err
	}
	if path == "" {
		return Default(), "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("read config: %w", err)
	}
	c, ps := parse(data, path, os.LookupEnv)
	if len(ps) > 0 {
		return c, path, ps
	}
	return c, path, nil
}

// LoadOrDefaultFor is LoadOrDefault for a command that uses only part of the
// config, such as the database: only the problems of the keys it names stop
// it, so an admin command doesn't need, say, the API token exported. A key
// covers the keys below it, and "[]" stands for any list index, as in
// "hooks[].id". Problems of a key's parents (a section that is not a
// mapping), of the file as a whole and unknown top-level keys (a misspelt
// section) always count.
func LoadOrDefaultFor(flagPath string, keys ...string) (*Config, string, error) {
	c, path, err := LoadForCheck(flagPath)
	var ps Problems
	if !errors.As(err, &ps) || c == nil {
		return c, path, err
	}
	var kept Problems
	for _, p := range ps {
		if p.concerns(keys) {
			kept = append(kept, p)
		}
	}
	if len(kept) > 0 {
		return nil, path, kept
	}
	return c, path, nil
}

var listIndex = lazyregexp.New(`\[\d+\]`)

// concerns reports whether the problem matters to a command using keys.
func (p Problem) concerns(keys []string) bool {
	k := listIndex.ReplaceAllString(p.Key, "[]")
	if k == "" {
		return true
	}
	if !strings.ContainsAny(k, ".[") && !topLevelKeys[k] {
		return true // an unknown section, perhaps a misspelt one the command uses
	}
	within := func(k, key string) bool {
		return k == key || strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[")
	}
	for _, key := range keys {
		if within(k, key) || within(key, k) {
			return true
		}
	}
	return false
}

var topLevelKeys = func() map[string]bool {
	names, _ := yamlFields(reflect.TypeFor[Config]())
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}()

// find is the file LoadOrDefault reads, "" for the defaults, or why it
// can't be read.
func find(flagPath string) (string, error) {
	path, explicit := Find(flagPath)
	if path == "" {
		return "", nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		how := "named on the command line"
		if !explicit {
			how = "found in the working directory"
		} else if flagPath == "" {
			how = "named by $" + EnvConfigPath
		}
		return path, fmt.Errorf("config file %q (%s) does not exist; create it, e.g. cp config.example.yaml %s, or name an existing file: %w",
			path, how, path, fs.ErrNotExist)
	}
	return path, nil
}

// Load reads the file at path and parses it with the process environment.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path, os.LookupEnv)
}

// Parse decodes a YAML configuration, expands ${VAR} references with getenv
// (nil means every variable is unset), fills in defaults and validates the
// result. filename is only used in messages. Any problems come back together
// as Problems.
func Parse(data []byte, filename string, getenv func(string) (string, bool)) (*Config, error) {
	c, ps := parse(data, filename, getenv)
	if len(ps) > 0 {
		return nil, ps
	}
	return c, nil
}

// parse is Parse returning the config even when it has problems; it is nil
// only when the YAML does not parse.
func parse(data []byte, filename string, getenv func(string) (string, bool)) (*Config, Problems) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	ck := newChecker(filename)
	root, ok := ck.parseYAML(data)
	if !ok {
		return nil, ck.problems
	}
	c := &Config{}
	if root != nil {
		ck.expand(root, "", getenv)
		ck.check(root, reflect.TypeFor[Config](), "")
		// The checker reports a superset of yaml's own type errors, with
		// better messages; yaml's only matter if the checker missed one.
		if err := root.Decode(c); err != nil && len(ck.problems) == 0 {
			ck.addYAMLError(err)
		}
	}
	c.applyDefaults(ck.set)
	c.placeAdapters(filename)
	c.file, c.lines = filename, ck.lines
	c.validate(ck)
	ck.problems.sortByLine()
	return c, ck.problems
}

// parseYAML returns the top node of a single YAML document, nil for a file
// with no content, and false when the YAML does not parse.
func (c *checker) parseYAML(data []byte) (*yaml.Node, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, true
	} else if err != nil {
		c.addYAMLError(err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		c.addAt(extra.Line, "", "found a second YAML document; put all the settings in one")
		return nil, false
	} else if !errors.Is(err, io.EOF) {
		c.addYAMLError(err)
		return nil, false
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, true
		}
		return doc.Content[0], true
	}
	return &doc, true
}

var yamlLinePrefix = lazyregexp.New(`^line (\d+): `)

// addYAMLError turns a yaml error ("yaml: line 3: ..." or a TypeError with
// one "line N: ..." per problem) into problems. yaml.v3 takes some syntax
// error lines from where the enclosing construct started, so those can point
// a line or so early; and it gives none for errors on the first line.
func (c *checker) addYAMLError(err error) {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	for _, msg := range msgs {
		line := 0
		if m := yamlLinePrefix.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		}
		c.addAt(line, "", "invalid YAML: "+msg)
	}
}

// expand replaces environment references in every scalar value (never in
// keys) below n. Working on parsed nodes means an expanded value can't change
// the document's structure and line numbers stay true.
func (c *checker) expand(n *yaml.Node, path string, getenv func(string) (string, bool)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, child := range n.Content {
			c.expand(child, path, getenv)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.expand(n.Content[i+1], joinKey(path, n.Content[i].Value), getenv)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			c.expand(e, fmt.Sprintf("%s[%d]", path, i), getenv)
		}
	case yaml.ScalarNode:
		v, err := expandEnv(n.Value, getenv)
		if err != nil {
			c.addAt(n.Line, path, err.Error())
			c.badRef[path] = true
			v = ""
		}
		if v != n.Value {
			n.Value = v
			if n.Style == 0 {
				// Let an unquoted value take the type of what it expanded
				// to (a number, say), as if it had been written out.
				n.Tag = ""
			}
		}
	}
}

// expandEnv expands ${VAR} (an error when VAR is unset, so a forgotten
// export can't quietly fall back to a default), ${VAR:-default} (default
// when VAR is unset or empty; ${VAR:-} allows empty) and $$ (a literal $).
// ${secret:NAME} is checked and kept: the daemon resolves it from the
// secrets store (Config.ResolveSecrets).
// Any other $ is left alone, and expanded text is not expanded again.
func expandEnv(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case s[i+1] == '$' && strings.HasPrefix(s[i+2:], "{secret:"):
			return "", errors.New(`"$${secret:" would read as a reference to a stored secret; parley has no way to write that text literally`)
		case s[i+1] == '$':
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], secretRefPrefix):
			// A stored secret: left as it is, for the daemon to resolve.
			n, err := checkSecretRef(s, i)
			if err != nil {
				return "", err
			}
			b.WriteString(s[i : i+n])
			i += n - 1
		case s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New(`"${" has no closing "}"; write ${NAME} or ${NAME:-default}, or $$ for a literal $`)
			}
			name, def, hasDefault := strings.Cut(s[i+2:i+2+end], ":-")
			if !envName.MatchString(name) {
				if before, _, ok := strings.Cut(name, ":"); ok {
					// Don't echo what follows: it may be a default password.
					return "", fmt.Errorf(`"${%s:..." is not a reference; use ${NAME} or ${NAME:-default}`, before)
				}
				return "", fmt.Errorf(`%q is not an environment variable name; use letters, digits and "_", not starting with a digit, as in ${NAME} or ${NAME:-default}`, name)
			}
			v, ok := getenv(name)
			switch {
			case hasDefault && (!ok || v == ""):
				v = def
			case !ok:
				return "", fmt.Errorf("environment variable %s is not set; export it, or write ${%s:-} where empty is fine, or ${%s:-default} for a default",
					name, name, name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

var envName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// DisplayPath is a config path as messages show it: the path, or "(built-in
// defaults)" when no file was read.
func DisplayPath(p string) string {
	if p == "" {
		return "(built-in defaults)"
	}
	return p
}
