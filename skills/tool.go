package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parleyd/parley/tools"
)

// ToolName is the tool that loads a skill. Its results are never pruned
// from the prompt: they are instructions the model goes on following.
const ToolName = "skill"

// MaxIndexed caps the skills the prompt lists; the tool lists them all.
const MaxIndexed = 100

var toolSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64, "description": "The skill to load, as the skill list names it. Leave it out to list the skills."},
    "file": {"type": "string", "minLength": 1, "maxLength": 512, "description": "One of the skill's files to read, as its instructions list it, such as \"reference.md\"."}
  },
  "additionalProperties": false
}`)

// toolArgs are the skill tool's arguments (toolSchema).
type toolArgs struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// Index is the prompt's skill index: how to use skills, then each skill's
// name and description. Empty when there are none.
func Index(list []Skill) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Skills are instructions for particular tasks. When a task fits one, call the %s tool with its name "+
		"before you start, and follow the instructions it gives.\n", ToolName)
	for i, s := range list {
		if i == MaxIndexed {
			fmt.Fprintf(&b, "\n(%d more: call %s with no name to list them all.)", len(list)-MaxIndexed, ToolName)
			break
		}
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Description)
	}
	return b.String()
}

// Tool is the skill tool over list, the skills of the agent it serves:
// with no name it lists them, with a name it returns that skill's
// instructions and the files it holds, and with a file that file.
func Tool(list []Skill) tools.Tool {
	return tools.Tool{
		Name: ToolName,
		Description: "Load a skill's instructions by name (the system prompt lists the skills), or read one of a skill's files. " +
			"Call it before a task a skill fits.",
		Schema: toolSchema,
		Run: tools.Decoded(ToolName, `{"name": "..."}`, func(_ context.Context, _ tools.Call, args toolArgs) (string, error) {
			name := strings.TrimSpace(args.Name)
			if name == "" {
				if args.File != "" {
					return "", fmt.Errorf("%s: name the skill the file belongs to", ToolName)
				}
				return listing(list), nil
			}
			s, ok := find(list, name)
			if !ok {
				return "", fmt.Errorf("%s: there is no skill called %q; the skills are: %s", ToolName, name, names(list))
			}
			if args.File != "" {
				// ReadFile's errors name the skill and the file.
				return s.ReadFile(args.File)
			}
			return load(s)
		}),
	}
}

// load is what the tool gives for one skill: its name, description, files
// and instructions.
func load(s Skill) (string, error) {
	body, err := s.Instructions()
	if err != nil {
		return "", fmt.Errorf("%s: skill %s can't be read now: %w", ToolName, s.Name, err)
	}
	files, more, err := s.Files()
	if err != nil {
		return "", fmt.Errorf("%s: the files of skill %s can't be listed: %w", ToolName, s.Name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill: %s\n\n%s\n", s.Name, s.Description)
	if len(files) > 0 {
		fmt.Fprintf(&b, "\nFiles of this skill (read one with %s and {\"name\": %q, \"file\": \"<path>\"}):\n", ToolName, s.Name)
		for _, f := range files {
			b.WriteString("- " + f + "\n")
		}
		if more {
			fmt.Fprintf(&b, "(only the first %d are listed)\n", MaxFiles)
		}
	}
	b.WriteString("\n## Instructions\n\n")
	if body == "" {
		body = "(This skill's SKILL.md has no instructions below its front matter.)"
	}
	b.WriteString(body)
	return b.String(), nil
}

func listing(list []Skill) string {
	if len(list) == 0 {
		return "There are no skills."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d skills (load one with {\"name\": \"...\"}):\n", len(list))
	for _, s := range list {
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, s.Description)
	}
	return b.String()
}

func find(list []Skill, name string) (Skill, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}

func names(list []Skill) string {
	if len(list) == 0 {
		return "none"
	}
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return strings.Join(out, ", ")
}
