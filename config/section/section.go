// Package section is the contract between the config package and the
// packages that own a part of parley's configuration. A package declares
// its section as a struct with yaml tags; its SetDefaults fills in what
// the file left out, and its Check reports what is wrong, by key. The
// config package decodes the file, walks the decoded tree and calls both
// on every section it reaches, so it never lists a subsystem's defaults
// or rules itself.
//
// Keys are relative to the section: a section at "speech" that reports
// "max_bytes" is reported as "speech.max_bytes", with the file and line
// of that key.
package section

// Defaulter is a section that fills in the settings the file left out.
// The config package calls SetDefaults on every section it reaches,
// outer sections before the sections within them.
type Defaulter interface {
	SetDefaults(set Set)
}

// Checker is a section that reports its own problems. Check runs after
// every section's defaults are in place, outer sections before the
// sections within them; it may keep what it worked out (a parsed
// template, a loaded time zone) but fills in no default.
type Checker interface {
	Check(r Reporter)
}

// Set tells a section which of its keys the file gave a value, so that an
// explicit 0 is checked rather than replaced by the default. The zero Set
// reports that no key was given, as for the built-in defaults.
type Set struct {
	has    func(key string) bool
	prefix string
}

// NewSet is a Set for the section at prefix (such as "speech" or
// "agents[0]"), whose keys has answers for by their full path.
func NewSet(prefix string, has func(key string) bool) Set {
	return Set{has: has, prefix: prefix}
}

// Has reports whether the file gave key, relative to the section, a
// value.
func (s Set) Has(key string) bool {
	return s.has != nil && s.has(Join(s.prefix, key))
}

// Default sets *v to def when it is the zero value and the file did not
// give key a value.
func Default[T comparable](v *T, set Set, key string, def T) {
	var zero T
	if *v == zero && !set.Has(key) {
		*v = def
	}
}

// Reporter takes a section's problems: key is relative to the section
// ("" for the section itself), and msg says what is wrong and what is
// allowed.
type Reporter interface {
	Add(key, msg string)
}

// Problem is one problem a section reported.
type Problem struct {
	Key, Message string
}

// List is a Reporter that keeps the problems it is given, for tests and
// for callers that check one section alone.
type List []Problem

// Add keeps a problem.
func (l *List) Add(key, msg string) { *l = append(*l, Problem{Key: key, Message: msg}) }

// Keys are the keys of the problems, in order.
func (l List) Keys() []string {
	out := make([]string, len(l))
	for i, p := range l {
		out[i] = p.Key
	}
	return out
}

// Prefixed is a Reporter that reports each key below prefix to r.
func Prefixed(r Reporter, prefix string) Reporter {
	if prefix == "" {
		return r
	}
	return prefixed{r, prefix}
}

type prefixed struct {
	r      Reporter
	prefix string
}

func (p prefixed) Add(key, msg string) { p.r.Add(Join(p.prefix, key), msg) }

// Join joins a section's path and a key within it: "speech" and
// "max_bytes" give "speech.max_bytes", "agents[0]" and "" give
// "agents[0]", and a key that starts with "[" is an index.
func Join(prefix, key string) string {
	switch {
	case prefix == "":
		return key
	case key == "":
		return prefix
	case key[0] == '[':
		return prefix + key
	}
	return prefix + "." + key
}
