package config

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a configuration file.
type Problem struct {
	File    string // the file name given to Parse; may be empty
	Line    int    // 1-based; 0 when the key is not in the file
	Key     string // dotted key path such as "agents[0].timezone"; may be empty
	Message string // what is wrong and what is allowed
}

// Error formats the problem as "file:line: key: message". The key is left out
// when the message already quotes it, as in `unknown key "log.lvl" (...)`.
func (p Problem) Error() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		b.WriteString(p.File + ":" + strconv.Itoa(p.Line) + ": ")
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Key != "" && !strings.Contains(p.Message, strconv.Quote(p.Key)) {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found in a configuration file. Parse returns it
// as its error, so callers can get at it with errors.As.
type Problems []Problem

// Error lists the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// sortByLine orders problems by line, keeping those without a line last and
// the order of problems on the same line.
func (ps Problems) sortByLine() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		la, lb := a.Line, b.Line
		if la == 0 {
			la = math.MaxInt
		}
		if lb == 0 {
			lb = math.MaxInt
		}
		return cmp.Compare(la, lb)
	})
}
