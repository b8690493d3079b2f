package config

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/config/section"
)

// checker walks a YAML node tree against the Config struct, collecting
// problems and remembering where each key is, so that later validation
// messages can point at the right line.
type checker struct {
	file     string
	problems Problems
	lines    map[string]int  // dotted key path -> line of the key
	set      map[string]bool // key paths holding a non-null, well-typed value
	// badRef holds the keys whose environment reference failed: their
	// value is blank, which validation must not report a second time.
	badRef map[string]bool
}

func newChecker(file string) *checker {
	return &checker{file: file, lines: map[string]int{}, set: map[string]bool{}, badRef: map[string]bool{}}
}

// addAt records a problem at a known line.
func (c *checker) addAt(line int, key, msg string) {
	c.problems = append(c.problems, Problem{File: c.file, Line: line, Key: key, Message: msg})
}

// add records a problem at the line of key, or of its nearest ancestor when
// the key itself is not in the file.
func (c *checker) add(key, msg string) {
	if c.badRef[key] {
		return
	}
	c.addAt(c.lineOf(key), key, msg)
}

func (c *checker) lineOf(key string) int {
	for key != "" {
		if line, ok := c.lines[key]; ok {
			return line
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

var (
	durationType = reflect.TypeFor[Duration]()
	dsnType      = reflect.TypeFor[DSN]()
	secretType   = reflect.TypeFor[Secret]()
)

// check reports unknown and duplicate keys and values of the wrong type in n,
// which is meant to decode into a t at the dotted key path.
func (c *checker) check(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		if n.Alias != nil {
			c.check(n.Alias, t, path)
		}
		return
	}
	if isNull(n) {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && t != durationType:
		if n.Kind != yaml.MappingNode {
			c.addAt(n.Line, path, "expected a mapping of keys, got "+describe(n, t))
			return
		}
		names, fields := yamlFields(t)
		seen := map[string]int{}
		// An adapter entry's other keys are its type's to check.
		c.checkKeys(n, path, names, fields, seen, false, t == adapterType)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		// A section keyed by names its owner checks (providers by name).
		if n.Kind != yaml.MappingNode {
			c.addAt(n.Line, path, "expected a mapping of names, got "+describe(n, t))
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				c.addAt(k.Line, path, "keys must be plain names, not lists or mappings")
				continue
			}
			full := joinKey(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				c.addAt(k.Line, full, fmt.Sprintf("duplicate key %q (first set on line %d)", full, first))
				continue
			}
			seen[k.Value] = k.Line
			c.lines[full] = k.Line
			c.check(v, t.Elem(), full)
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			c.addAt(n.Line, path, "expected a list, got "+describe(n, t))
			return
		}
		for i, e := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			c.lines[p] = e.Line
			c.check(e, t.Elem(), p)
		}
	default:
		c.checkScalar(n, t, path)
	}
}

// checkKeys checks a mapping's keys against a struct's fields. Keys written in
// the mapping are checked before those pulled in with "<<: *anchor", which
// they override, as YAML says.
func (c *checker) checkKeys(n *yaml.Node, path string, names []string, fields map[string]reflect.Type, seen map[string]int, merged, open bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.addAt(k.Line, path, "keys must be plain names, not lists or mappings")
			continue
		}
		full := joinKey(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			if !merged {
				c.addAt(k.Line, full, fmt.Sprintf("duplicate key %q (first set on line %d)", full, first))
			}
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok && open {
			continue
		}
		if !ok {
			msg := fmt.Sprintf("unknown key %q", full)
			if near := suggest(k.Value, names); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", joinKey(path, near))
			}
			c.addAt(k.Line, full, fmt.Sprintf("%s (known keys: %s)", msg, strings.Join(names, ", ")))
			continue
		}
		c.lines[full] = k.Line
		c.check(v, ft, full)
	}
	for _, m := range merges {
		c.checkMerge(m, path, names, fields, seen, open)
	}
}

// checkMerge checks the value of a "<<" key: a mapping or a list of them.
func (c *checker) checkMerge(m *yaml.Node, path string, names []string, fields map[string]reflect.Type, seen map[string]int, open bool) {
	if m.Kind == yaml.AliasNode && m.Alias != nil {
		m = m.Alias
	}
	switch m.Kind {
	case yaml.MappingNode:
		c.checkKeys(m, path, names, fields, seen, true, open)
	case yaml.SequenceNode:
		for _, e := range m.Content {
			c.checkMerge(e, path, names, fields, seen, open)
		}
	default:
		c.addAt(m.Line, path, `"<<" must merge a mapping or a list of mappings`)
	}
}

// checkScalar decodes n into a throwaway t to see whether the type fits.
func (c *checker) checkScalar(n *yaml.Node, t reflect.Type, path string) {
	msg := fmt.Sprintf("expected %s, got %s", expected(t), describe(n, t))
	if n.Kind != yaml.ScalarNode {
		c.addAt(n.Line, path, msg)
		return
	}
	// yaml.v3 truncates 1.5 to 1 for an int; refuse anything but an integer.
	wrongKind := isInt(t) && n.ShortTag() != "!!int"
	if err := n.Decode(reflect.New(t).Interface()); err != nil || wrongKind {
		unquoted := *n
		unquoted.Tag, unquoted.Style = "", 0
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 &&
			unquoted.Decode(reflect.New(t).Interface()) == nil && (!isInt(t) || unquoted.ShortTag() == "!!int") {
			msg += "; remove the quotes"
		}
		c.addAt(n.Line, path, msg)
		return
	}
	c.set[path] = true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// yamlFields returns a struct's YAML keys in declaration order, and the type
// behind each.
func yamlFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, ok := yamlName(f)
		if !ok {
			continue
		}
		names = append(names, name)
		fields[name] = f.Type
	}
	return names, fields
}

// yamlName is the YAML key of a struct field, as yaml.v3 names it; false
// for a field YAML leaves out.
func yamlName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expected describes the kind of value a type takes.
func expected(t reflect.Type) string {
	switch {
	case t == durationType:
		return section.DurationHint
	case t.Kind() == reflect.Struct:
		return "a mapping of keys"
	case t.Kind() == reflect.Slice:
		return "a list"
	}
	if isInt(t) {
		return "an integer"
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// describe says what a node holds, quoting a scalar unless it is headed for
// a secret.
func describe(n *yaml.Node, t reflect.Type) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if t == dsnType || t == secretType {
			return "a value that is not shown because it may be secret"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// isInt reports whether t is a plain integer (Duration is written as text).
func isInt(t reflect.Type) bool {
	if t == durationType {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}
