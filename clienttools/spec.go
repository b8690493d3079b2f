// Package clienttools keeps the tools an API session's client declares and
// carries their calls to the client and back. A declared tool is offered to
// the session's agent like its own; when the model calls one, the run waits
// (status waiting_for_tool_results) until the client posts the result, or
// until the timeout, which ends the turn with an error result.
//
// The declarations are stored with the session (table
// session_client_tools); the calls waiting for results are in this
// process's memory (a Hub), where the API's tool_results route finds them.
package clienttools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/tools"
)

// Limits of a declaration.
const (
	MaxTools            = 64
	MaxDescriptionChars = 4096
	MaxSchemaBytes      = 32 << 10
)

var nameRule = lazyregexp.New(`^[a-zA-Z0-9_-]{1,64}$`)

// Spec is one tool a client declared: what the model is told of it.
type Spec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the arguments object; empty means
	// the tool takes no arguments.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Checked reports whether parley checks the model's arguments against the
// schema before the call reaches the client. A schema using keywords
// outside parley's subset (anyOf, $ref, pattern, ...) still goes to the
// model as it is, but the client must check the arguments itself.
func (s Spec) Checked() bool {
	return len(bytes.TrimSpace(s.InputSchema)) == 0 || tools.CheckSchema(s.InputSchema) == nil
}

// Validate checks a declaration and returns its tools cleaned (names and
// descriptions trimmed, schemas compacted), or an error wrapping ErrInvalid
// that names each bad field. taken, if set, says a name belongs to a tool
// of parley's own, which a client tool can't shadow.
func Validate(specs []Spec, taken func(name string) bool) ([]Spec, error) {
	if len(specs) > MaxTools {
		return nil, fmt.Errorf("%w: %d tools declared; a session may declare at most %d", ErrInvalid, len(specs), MaxTools)
	}
	var problems []string
	bad := func(i int, field, msg string) {
		problems = append(problems, fmt.Sprintf("tools[%d].%s %s", i, field, msg))
	}
	out := make([]Spec, len(specs))
	seen := map[string]int{}
	for i, s := range specs {
		s.Name = strings.TrimSpace(s.Name)
		s.Description = strings.TrimSpace(s.Description)
		switch j, dup := seen[s.Name]; {
		case !nameRule.MatchString(s.Name):
			bad(i, "name", fmt.Sprintf("%q is not a tool name; use 1-64 letters, digits, '_' or '-'", s.Name))
		case dup:
			bad(i, "name", fmt.Sprintf("%q is declared twice (also tools[%d]); give each tool its own name", s.Name, j))
		case taken != nil && taken(s.Name):
			bad(i, "name", fmt.Sprintf("%q is the name of one of parley's tools; give yours another name", s.Name))
		}
		seen[s.Name] = i
		switch n := utf8.RuneCountInString(s.Description); {
		case n == 0:
			bad(i, "description", "is required: say what the tool does and when to use it")
		case n > MaxDescriptionChars:
			bad(i, "description", fmt.Sprintf("is %d characters; the limit is %d", n, MaxDescriptionChars))
		}
		schema, msg := cleanSchema(s.InputSchema)
		if msg != "" {
			bad(i, "input_schema", msg)
		}
		s.InputSchema = schema
		out[i] = s
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return out, nil
}

// cleanSchema compacts a schema and checks that it describes an object;
// msg says what is wrong, or is "".
func cleanSchema(raw json.RawMessage) (json.RawMessage, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, ""
	}
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Sprintf("is %d bytes; the limit is %d", len(raw), MaxSchemaBytes)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
		return nil, "must be a JSON Schema object, such as {\"type\": \"object\", \"properties\": {...}}"
	}
	if t := doc["type"]; t != "object" {
		return nil, "must describe an object (\"type\": \"object\"): a tool's arguments are a JSON object"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, "is not valid JSON"
	}
	return b.Bytes(), ""
}

// Errors.
var (
	// ErrInvalid means a declaration or a result can't be accepted as
	// given; the message says which field and why.
	ErrInvalid = errors.New("invalid client tools")
	// ErrNoSession means the session does not exist.
	ErrNoSession = errors.New("session not found")
	// ErrNotWaiting means the session has no call waiting for a result.
	ErrNotWaiting = errors.New("the session is not waiting for tool results")
	// ErrUnknownCall means a result names a call the session is not
	// waiting for (answered already, timed out, or never asked).
	ErrUnknownCall = errors.New("no call waits for that result")
	// ErrTimeout is a call the client did not answer in time.
	ErrTimeout = errors.New("the client sent no result in time")
)
