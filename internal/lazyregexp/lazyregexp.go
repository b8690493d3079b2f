// Package lazyregexp holds regular expressions that are compiled the first
// time they are used, not when the program starts. A package-level
// regexp.MustCompile runs at initialization in every process, including
// the many that never match it: parley's validation patterns cost about
// 0.1 ms each at every start.
package lazyregexp

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on first use.
type Regexp struct {
	compile func() *regexp.Regexp
}

// New returns expr, to be compiled on first use. A bad expression panics
// then, as regexp.MustCompile does; the tests of each package that
// declares one use it, so a bad one fails them.
func New(expr string) *Regexp {
	return &Regexp{compile: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// MatchString reports whether s contains a match.
func (r *Regexp) MatchString(s string) bool { return r.compile().MatchString(s) }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.compile().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.compile().FindAllStringSubmatch(s, n)
}

// ReplaceAllString is regexp.Regexp's.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.compile().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp's.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.compile().ReplaceAllStringFunc(src, repl)
}

// FindString is regexp.Regexp's.
func (r *Regexp) FindString(s string) string { return r.compile().FindString(s) }

// FindStringSubmatchIndex is regexp.Regexp's.
func (r *Regexp) FindStringSubmatchIndex(s string) []int {
	return r.compile().FindStringSubmatchIndex(s)
}
