package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/tools"
)

// The tools' names.
const (
	GetToolName    = "kv_get"
	SetToolName    = "kv_set"
	ListToolName   = "kv_list"
	DeleteToolName = "kv_delete"
)

var keySchema = fmt.Sprintf(`"key": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The key."}`, MaxKeyBytes)

// Tools are the session storage tools on s.
func Tools(s *Store) []tools.Tool {
	return []tools.Tool{
		{Name: GetToolName, Description: "Read a value this conversation stored with kv_set.",
			Schema: json.RawMessage(`{"type": "object", "properties": {` + keySchema + `}, "required": ["key"], "additionalProperties": false}`),
			Run: func(ctx context.Context, c tools.Call) (string, error) {
				var in struct{ Key string }
				if err := tools.Decode(c.Arguments, &in); err != nil {
					return "", err
				}
				e, err := s.Get(ctx, c.SessionID, in.Key)
				if errors.Is(err, ErrNotFound) {
					return "", fmt.Errorf("nothing is stored under %q; kv_list shows the keys", in.Key)
				}
				return e.Value, err
			}},
		{Name: SetToolName, Description: fmt.Sprintf("Store a value under a key for the rest of this conversation (at most %d keys of %d KiB).", MaxKeys, MaxValueBytes>>10),
			Schema: json.RawMessage(`{"type": "object", "properties": {` + keySchema + `, "value": {"type": "string", "description": "The value."}}, "required": ["key", "value"], "additionalProperties": false}`),
			Run: func(ctx context.Context, c tools.Call) (string, error) {
				var in struct{ Key, Value string }
				if err := tools.Decode(c.Arguments, &in); err != nil {
					return "", err
				}
				if err := s.Set(ctx, c.SessionID, in.Key, in.Value); err != nil {
					return "", err
				}
				return "stored " + in.Key, nil
			}},
		{Name: ListToolName, Description: "List the keys this conversation stored, with their values' sizes.",
			Schema: json.RawMessage(`{"type": "object", "properties": {"prefix": {"type": "string", "description": "Only keys starting with this."}}, "additionalProperties": false}`),
			Run: func(ctx context.Context, c tools.Call) (string, error) {
				var in struct{ Prefix string }
				if err := tools.Decode(c.Arguments, &in); err != nil {
					return "", err
				}
				es, err := s.List(ctx, c.SessionID, in.Prefix)
				if err != nil || len(es) == 0 {
					return "no keys", err
				}
				lines := make([]string, len(es))
				for i, e := range es {
					lines[i] = fmt.Sprintf("%s (%d bytes)", e.Key, len(e.Value))
				}
				return strings.Join(lines, "\n"), nil
			}},
		{Name: DeleteToolName, Description: "Delete a key this conversation stored.",
			Schema: json.RawMessage(`{"type": "object", "properties": {` + keySchema + `}, "required": ["key"], "additionalProperties": false}`),
			Run: func(ctx context.Context, c tools.Call) (string, error) {
				var in struct{ Key string }
				if err := tools.Decode(c.Arguments, &in); err != nil {
					return "", err
				}
				ok, err := s.Delete(ctx, c.SessionID, in.Key)
				if err == nil && !ok {
					return "nothing was stored under " + in.Key, nil
				}
				return "deleted " + in.Key, err
			}},
	}
}
