package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/skills"
	"github.com/parleyd/parley/tools"
)

// write makes files under dir: path → content.
func write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func skillMD(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\nlicense: MIT\n---\n" + body
}

func TestLoadFindsSkillsAndReportsBrokenOnes(t *testing.T) {
	workspace, shared := t.TempDir(), t.TempDir()
	write(t, workspace, map[string]string{
		"pdf/SKILL.md":       skillMD("pdf-forms", "Fill in PDF forms.", "Use the form tool."),
		"review/SKILL.md":    "\uFEFF---\r\nname: review\r\ndescription: >\r\n  Review a pull\r\n  request.\r\n---\r\nRead the diff.\r\n",
		"nofront/SKILL.md":   "# Just text\n",
		"nodesc/SKILL.md":    "---\nname: nodesc\n---\nbody",
		"badname/SKILL.md":   skillMD("Bad Name", "x", ""),
		"unclosed/SKILL.md":  "---\nname: unclosed\ndescription: d\n",
		"badyaml/SKILL.md":   "---\nname: [\n---\n",
		"noskill/notes.md":   "not a skill",
		".hidden/SKILL.md":   skillMD("hidden", "never found", ""),
		"unnamed/SKILL.md":   "---\ndescription: Named after its folder.\n---\n",
		"plain-file.md":      "a file, not a folder",
		"toolong/SKILL.md":   skillMD("toolong", strings.Repeat("d", skills.MaxDescriptionChars+1), ""),
		"big/SKILL.md":       skillMD("big", "too big", strings.Repeat("x", skills.MaxSkillBytes)),
		"latin1/SKILL.md":    "---\nname: latin1\ndescription: caf\xe9\n---\n",
		"sharedpdf/SKILL.md": "",
		"longfront/SKILL.md": "---\nname: longfront\ndescription: d\nnotes: " + strings.Repeat("n", 17<<10) + "\n---\n",
	})
	write(t, shared, map[string]string{
		"pdf/SKILL.md":    skillMD("pdf-forms", "The shared copy, hidden by the workspace's.", ""),
		"deploy/SKILL.md": skillMD("deploy", "Deploy the app.", "Run make deploy."),
	})
	list, problems := skills.Load([]string{workspace, filepath.Join(workspace, "missing"), shared})
	var got []string
	for _, s := range list {
		got = append(got, s.Name+"="+s.Description)
	}
	want := "deploy=Deploy the app.|pdf-forms=Fill in PDF forms.|review=Review a pull request.|unnamed=Named after its folder."
	if strings.Join(got, "|") != want {
		t.Errorf("skills = %q\nwant     %q", strings.Join(got, "|"), want)
	}
	wantProblems := []string{
		"nofront/SKILL.md has no front matter",
		"nodesc/SKILL.md has no description",
		`the name "Bad Name" is not allowed`,
		"the front matter has no closing --- line",
		"the front matter is not valid YAML",
		"the description is 1025 characters and the limit is 1024",
		"big/SKILL.md is over 256 KiB",
		"latin1/SKILL.md is not UTF-8 text",
		"sharedpdf/SKILL.md has no front matter",
		"longfront/SKILL.md: the front matter is over 16 KiB",
	}
	all := ""
	for _, p := range problems {
		all += p.Error() + "\n"
	}
	for _, w := range wantProblems {
		if !strings.Contains(all, w) {
			t.Errorf("problems do not say %q:\n%s", w, all)
		}
	}
	if len(problems) != len(wantProblems) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(wantProblems), all)
	}
	review := list[slices.IndexFunc(list, func(s skills.Skill) bool { return s.Name == "review" })]
	if body, err := review.Instructions(); err != nil || body != "Read the diff." {
		t.Errorf("review's instructions = %q, %v", body, err)
	}
}

func TestIndex(t *testing.T) {
	if got := skills.Index(nil); got != "" {
		t.Errorf("index of no skills = %q", got)
	}
	list := []skills.Skill{{Name: "a", Description: "Does A."}, {Name: "b", Description: "Does B."}}
	got := skills.Index(list)
	if !strings.Contains(got, "call the skill tool with its name") || !strings.HasSuffix(got, "\n- a: Does A.\n- b: Does B.") {
		t.Errorf("index = %q", got)
	}
	many := make([]skills.Skill, skills.MaxIndexed+3)
	for i := range many {
		many[i] = skills.Skill{Name: "s", Description: "d"}
	}
	got = skills.Index(many)
	if n := strings.Count(got, "\n- s: d"); n != skills.MaxIndexed || !strings.Contains(got, "(3 more: call skill with no name to list them all.)") {
		t.Errorf("index of %d skills lists %d: %q", len(many), n, got[len(got)-100:])
	}
}

func TestToolLoadsInstructionsAndFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	write(t, dir, map[string]string{
		"pdf/SKILL.md":            skillMD("pdf-forms", "Fill in PDF forms.", "1. Read reference.md.\n2. Fill the form."),
		"pdf/reference.md":        "Field names are case-sensitive.",
		"pdf/scripts/fill.py":     "print('fill')",
		"pdf/.cache/x":            "hidden",
		"pdf/binary.bin":          "a\x00b",
		"empty/SKILL.md":          skillMD("empty", "Has no body.", ""),
		"empty/sub/deeper/a.txt":  "deep",
		"empty/sub/deeper/../b.x": "x",
	})
	write(t, outside, map[string]string{"secret.txt": "TOP-SECRET-CONTENT"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "pdf", "link.txt")); err != nil {
		t.Fatal(err)
	}
	list, problems := skills.Load([]string{dir})
	if len(problems) > 0 || len(list) != 2 {
		t.Fatalf("load: %v %v", list, problems)
	}
	reg := tools.NewRegistry()
	if err := reg.Register(skills.Tool(list)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, args string
		isError    bool
		want       []string
	}{
		{"list", `{}`, false, []string{"2 skills", "- empty: Has no body.", "- pdf-forms: Fill in PDF forms."}},
		{"load", `{"name": "pdf-forms"}`, false, []string{
			"# Skill: pdf-forms\n\nFill in PDF forms.\n",
			"Files of this skill (read one with skill and {\"name\": \"pdf-forms\", \"file\": \"<path>\"}):\n- binary.bin\n- reference.md\n- scripts/fill.py\n",
			"## Instructions\n\n1. Read reference.md.\n2. Fill the form.",
		}},
		{"load without a body", `{"name": "empty"}`, false, []string{"- sub/b.x\n- sub/deeper/a.txt\n", "has no instructions below its front matter"}},
		{"a file", `{"name": "pdf-forms", "file": "reference.md"}`, false, []string{"Field names are case-sensitive."}},
		{"a nested file", `{"name": "pdf-forms", "file": "scripts/fill.py"}`, false, []string{"print('fill')"}},
		{"unknown skill", `{"name": "nope"}`, true, []string{`there is no skill called "nope"; the skills are: empty, pdf-forms`}},
		{"missing file", `{"name": "pdf-forms", "file": "nope.md"}`, true, []string{`has no file "nope.md"`}},
		{"parent path", `{"name": "pdf-forms", "file": "../empty/SKILL.md"}`, true, []string{"is not a path inside the skill's folder"}},
		{"absolute path", `{"name": "pdf-forms", "file": "` + filepath.Join(outside, "secret.txt") + `"}`, true, []string{"is not a path inside the skill's folder"}},
		{"link out of the folder", `{"name": "pdf-forms", "file": "link.txt"}`, true, []string{"can't be read (it may lead outside the skill's folder)"}},
		{"binary", `{"name": "pdf-forms", "file": "binary.bin"}`, true, []string{"is not a text file"}},
		{"a folder", `{"name": "pdf-forms", "file": "scripts"}`, true, []string{"is a folder"}},
		{"file without a skill", `{"file": "reference.md"}`, true, []string{"name the skill"}},
		{"unknown argument", `{"skill": "pdf-forms"}`, true, []string{"invalid arguments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := reg.Call(context.Background(), tools.Call{Name: skills.ToolName, Arguments: json.RawMessage(tc.args)})
			if res.IsError != tc.isError {
				t.Fatalf("error = %v, want %v: %s", res.IsError, tc.isError, res.Content)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("result does not hold %q:\n%s", w, res.Content)
				}
			}
			if strings.Contains(res.Content, "TOP-SECRET-CONTENT") || strings.Contains(res.Content, "hidden") {
				t.Errorf("result leaks a hidden or outside file:\n%s", res.Content)
			}
		})
	}
}
