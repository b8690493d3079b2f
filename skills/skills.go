// Package skills finds an agent's skills and serves them to the model. A
// skill is a folder holding a SKILL.md: YAML front matter with its name and
// a one-line description, then the instructions, and optionally other
// files (references, templates, scripts) the instructions mention. The
// prompt lists each skill's name and description (Index); the skill tool
// loads one's instructions, or one of its files, when the model asks.
package skills

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/parleyd/parley/internal/lazyregexp"
)

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// Limits of what a skill may hold.
const (
	// MaxSkillBytes caps a SKILL.md.
	MaxSkillBytes = 256 << 10
	// MaxFileBytes caps one other file the tool reads.
	MaxFileBytes = 256 << 10
	// MaxDescriptionChars caps a description.
	MaxDescriptionChars = 1024
	// MaxFiles caps the files a skill lists.
	MaxFiles = 200
)

var nameRule = lazyregexp.New(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Skill is one skill found in a folder.
type Skill struct {
	Name        string
	Description string
	// Dir is the skill's folder.
	Dir string
}

// frontMatter is what SKILL.md starts with. Other keys (license,
// allowed-tools, metadata) are allowed and left alone.
type frontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// Load finds the skills in dirs: each sub-folder that holds a SKILL.md.
// A name found in an earlier dir hides the same name in a later one (an
// agent's workspace, listed first, overrides the shared skills). A dir that
// does not exist holds no skills; a skill that can't be read or whose front
// matter is wrong is left out, with an error saying what to fix. The skills
// come back sorted by name.
func Load(dirs []string) ([]Skill, []error) {
	var (
		out      []Skill
		problems []error
		seen     = map[string]bool{}
	)
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("skills folder %s can't be read: %w", dir, err))
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			sub := filepath.Join(dir, e.Name())
			if info, err := os.Stat(sub); err != nil || !info.IsDir() {
				continue
			}
			s, found, err := read(sub)
			switch {
			case err != nil:
				problems = append(problems, err)
			case found && !seen[s.Name]:
				seen[s.Name] = true
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, problems
}

// read reads the skill in dir; found is false when dir has no SKILL.md.
func read(dir string) (Skill, bool, error) {
	path := filepath.Join(dir, FileName)
	fm, _, err := parse(path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return Skill{}, false, nil
	}
	if err != nil {
		return Skill{}, true, err
	}
	s := Skill{Name: strings.TrimSpace(fm.Name), Description: strings.Join(strings.Fields(fm.Description), " "), Dir: dir}
	if s.Name == "" {
		s.Name = filepath.Base(dir)
	}
	switch {
	case !nameRule.MatchString(s.Name):
		return Skill{}, true, fmt.Errorf("skill %s: the name %q is not allowed; use up to 64 lower-case letters, digits, '-' or '_'", path, s.Name)
	case s.Description == "":
		return Skill{}, true, fmt.Errorf("skill %s has no description; add a description: line to its front matter saying when to use it", path)
	case utf8.RuneCountInString(s.Description) > MaxDescriptionChars:
		return Skill{}, true, fmt.Errorf("skill %s: the description is %d characters and the limit is %d; shorten it (the instructions go below the front matter)",
			path, utf8.RuneCountInString(s.Description), MaxDescriptionChars)
	}
	return s, true, nil
}

// maxFrontMatter caps the front matter Load reads of each skill.
const maxFrontMatter = 16 << 10

// parse reads a SKILL.md's front matter and, with withBody, its body. Load
// reads only the front matter, so a turn that lists skills reads a few
// lines of each.
func parse(path string, withBody bool) (frontMatter, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return frontMatter{}, "", err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return frontMatter{}, "", fmt.Errorf("skill %s can't be read: %w", path, err)
	} else if info.Size() > MaxSkillBytes {
		return frontMatter{}, "", fmt.Errorf("skill %s is over %d KiB; move details into other files of the skill's folder", path, MaxSkillBytes>>10)
	}
	r := bufio.NewReader(io.LimitReader(f, MaxSkillBytes+1))
	const fence = "---"
	line := func() (string, bool, error) {
		l, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", false, fmt.Errorf("skill %s can't be read: %w", path, err)
		}
		if !utf8.ValidString(l) {
			return "", false, fmt.Errorf("skill %s is not UTF-8 text", path)
		}
		return strings.TrimRight(l, "\r\n"), err == nil, nil
	}
	head, _, err := line()
	if err != nil {
		return frontMatter{}, "", err
	}
	if strings.TrimSpace(strings.TrimPrefix(head, "\uFEFF")) != fence {
		return frontMatter{}, "", fmt.Errorf("skill %s has no front matter; start it with a --- line, then name: and description:, then another --- line", path)
	}
	var yamlText strings.Builder
	for {
		l, more, err := line()
		if err != nil {
			return frontMatter{}, "", err
		}
		if strings.TrimSpace(l) == fence {
			break
		}
		if !more {
			return frontMatter{}, "", fmt.Errorf("skill %s: the front matter has no closing --- line", path)
		}
		yamlText.WriteString(l + "\n")
		if yamlText.Len() > maxFrontMatter {
			return frontMatter{}, "", fmt.Errorf("skill %s: the front matter is over %d KiB; keep it to name and description", path, maxFrontMatter>>10)
		}
	}
	var fm frontMatter
	if err := yaml.Unmarshal([]byte(yamlText.String()), &fm); err != nil {
		return frontMatter{}, "", fmt.Errorf("skill %s: the front matter is not valid YAML: %v", path, err)
	}
	if !withBody {
		return fm, "", nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return frontMatter{}, "", fmt.Errorf("skill %s can't be read: %w", path, err)
	}
	if len(b) > MaxSkillBytes || !utf8.Valid(b) {
		return frontMatter{}, "", fmt.Errorf("skill %s is over %d KiB or not UTF-8 text", path, MaxSkillBytes>>10)
	}
	return fm, strings.TrimSpace(strings.ReplaceAll(string(b), "\r\n", "\n")), nil
}

// Instructions is the body of the skill's SKILL.md, read now.
func (s Skill) Instructions() (string, error) {
	_, body, err := parse(filepath.Join(s.Dir, FileName), true)
	return body, err
}

// Files lists the skill's other files, as paths relative to its folder with
// "/" between names, sorted; more says the list stopped at MaxFiles. Hidden
// files and folders are left out, and symbolic links are not followed.
func (s Skill) Files() (files []string, more bool, err error) {
	err = filepath.WalkDir(s.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != s.Dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.Dir, path)
		if err != nil || rel == FileName {
			return err
		}
		if len(files) == MaxFiles {
			more = true
			return filepath.SkipAll
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, more, err
}

// ReadFile reads one of the skill's files as text. The path is relative to
// the skill's folder and can't leave it, through ".." or a link.
func (s Skill) ReadFile(rel string) (string, error) {
	name := filepath.FromSlash(rel)
	if !filepath.IsLocal(name) {
		return "", fmt.Errorf("%q is not a path inside the skill's folder; use a path the skill lists, such as \"reference.md\"", rel)
	}
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("skill %s has no file %q; its instructions list the files it has", s.Name, rel)
		}
		return "", fmt.Errorf("skill %s: %q can't be read (it may lead outside the skill's folder)", s.Name, rel)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || info.IsDir() {
		return "", fmt.Errorf("skill %s: %q is a folder, not a file", s.Name, rel)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("skill %s: %q can't be read: %w", s.Name, rel, err)
	}
	if len(b) > MaxFileBytes {
		return "", fmt.Errorf("skill %s: %q is over %d KiB, more than the tool reads", s.Name, rel, MaxFileBytes>>10)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", fmt.Errorf("skill %s: %q is not a text file", s.Name, rel)
	}
	return string(b), nil
}
