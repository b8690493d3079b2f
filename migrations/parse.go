package migrations

import (
	"errors"
	"fmt"
	"strings"
)

// parseUp splits a migration file's Up section into statements, as goose
// did: a statement ends with a line ending in ';' (before any -- comment),
// or, between -- +goose StatementBegin and StatementEnd, at the end line;
// comment lines between statements are dropped. Only comments may come
// before -- +goose Up; a -- +goose Down section, were there one, is not run (the
// migrations are forward-only). -- +goose NO TRANSACTION sets useTx false.
func parseUp(text string) (stmts []string, useTx bool, err error) {
	useTx = true
	var (
		buf      strings.Builder
		up, down bool // inside the Up section; past it
		block    bool // between StatementBegin and StatementEnd
	)
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		if !up && trimmed == "" {
			continue
		}
		if strings.HasPrefix(trimmed, "--") && strings.Contains(line, "+goose") {
			switch a := annotation(line); {
			case strings.EqualFold(a, "Up"):
				if up {
					return nil, false, errors.New("a second -- +goose Up")
				}
				up = true
				continue
			case strings.EqualFold(a, "Down"):
				if !up {
					return nil, false, errors.New("-- +goose Down before -- +goose Up")
				}
				down = true
			case strings.EqualFold(a, "StatementBegin"):
				if !up || block {
					return nil, false, errors.New("-- +goose StatementBegin outside the Up section or inside a block")
				}
				block = true
				continue
			case strings.EqualFold(a, "StatementEnd"):
				if !block {
					return nil, false, errors.New("-- +goose StatementEnd without StatementBegin")
				}
				block = false
				stmts = append(stmts, strings.TrimSpace(buf.String()))
				buf.Reset()
				continue
			case strings.EqualFold(a, "NO TRANSACTION"):
				useTx = false
				continue
			default:
				return nil, false, fmt.Errorf("unsupported annotation %q", line)
			}
		}
		if down {
			break
		}
		if buf.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		if !up {
			return nil, false, errors.New("the file must start with -- +goose Up")
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if !block && endsWithSemicolon(line) {
			stmts = append(stmts, strings.TrimSpace(buf.String()))
			buf.Reset()
		}
	}
	switch {
	case !up:
		return nil, false, errors.New("the file must start with -- +goose Up")
	case block:
		return nil, false, errors.New("-- +goose StatementBegin without StatementEnd")
	case strings.TrimSpace(buf.String()) != "":
		return nil, false, fmt.Errorf("unfinished statement (missing semicolon?): %q", strings.TrimSpace(buf.String()))
	}
	return stmts, useTx, nil
}

// annotation is what follows +goose on a -- line.
func annotation(line string) string {
	a := strings.ReplaceAll(line, "--", "")
	return strings.TrimSpace(strings.Replace(a, "+goose", "", 1))
}

// endsWithSemicolon reports whether the line's last word before a --
// comment ends with ';'.
func endsWithSemicolon(line string) bool {
	last := ""
	for _, w := range strings.Fields(line) {
		if strings.HasPrefix(w, "--") {
			break
		}
		last = w
	}
	return strings.HasSuffix(last, ";")
}
