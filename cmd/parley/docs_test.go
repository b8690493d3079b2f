package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	return append([]string{"../../README.md"}, files...)
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headRE   = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	spanRE   = regexp.MustCompile("`(parley [^`]+)`")
	slugDrop = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDrop.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// Every relative link in the docs names a file that exists and, with a
// #fragment, a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	checked := 0
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s links to %s, which is not there", file, target)
				continue
			}
			checked++
			if frag == "" {
				continue
			}
			found := false
			for _, h := range headRE.FindAllStringSubmatch(string(body), -1) {
				if slug(h[1]) == frag {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s links to %s, but %s has no heading #%s", file, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links checked")
	}
}

// docCommands are the parley command lines the docs show: each line of a
// shell block that runs parley, and each inline `parley ...` span.
func docCommands(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, file := range docFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		inShell := false
		for i, line := range strings.Split(string(data), "\n") {
			where := file + ":" + strconv.Itoa(i+1)
			if strings.HasPrefix(line, "```") {
				inShell = !inShell && (line == "```sh" || line == "```bash" || line == "```shell")
				continue
			}
			if inShell {
				if j := strings.Index(line, "parley "); j >= 0 && isCommandStart(line[:j]) {
					out[where] = append(out[where], line[j:])
				}
				continue
			}
			for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
				out[where] = append(out[where], m[1])
			}
		}
	}
	return out
}

// isCommandStart says whether what comes before "parley " on a shell line
// starts a command there (not a word inside another one's arguments).
func isCommandStart(before string) bool {
	b := strings.TrimSpace(before)
	if b == "" || strings.HasSuffix(b, "|") || strings.HasSuffix(b, "&&") || strings.HasSuffix(b, "$") ||
		strings.HasSuffix(b, "sudo") || strings.HasSuffix(b, "exec") {
		return true
	}
	// Environment assignments before the command: VAR=value parley ...
	for _, w := range strings.Fields(b) {
		if !strings.Contains(w, "=") {
			return false
		}
	}
	return true
}

// Every parley command the docs show names a command (and subcommand)
// the binary has, with flags that command takes.
func TestDocsCommandsResolve(t *testing.T) {
	checked := 0
	for where, lines := range docCommands(t) {
		for _, line := range lines {
			line, _, _ = strings.Cut(line, " #")
			line, _, _ = strings.Cut(line, " |")
			line, _, _ = strings.Cut(line, " &&")
			line, _, _ = strings.Cut(line, " / ")
			words := strings.Fields(line)[1:]
			var path []string
			for _, w := range words {
				if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "[]<>$\"'|=/.:") || strings.ToUpper(w) == w {
					break
				}
				path = append(path, w)
			}
			if len(path) == 0 {
				continue // "parley --help" and the like
			}
			c, n := findCommand(path)
			if c == nil || n == 0 {
				t.Errorf("%s: %q names no command", where, line)
				continue
			}
			if len(c.subs) > 0 && n == len(path) && !slices.Contains(words, "--help") {
				continue // a group named on its own, as a heading of its subcommands
			}
			fs, err := flagSetOf(path[:n])
			if err != nil {
				t.Errorf("%s: %q: %v", where, line, err)
				continue
			}
			checked++
			for _, w := range words {
				name, ok := strings.CutPrefix(strings.Trim(w, "[]`,"), "--")
				if !ok {
					continue
				}
				name, _, _ = strings.Cut(name, "=")
				if name == "" || name == "help" {
					continue
				}
				if fs == nil || fs.Lookup(name) == nil {
					t.Errorf("%s: %q: parley %s has no flag --%s", where, line, strings.Join(path[:n], " "), name)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d commands checked in the docs", checked)
	}
}
