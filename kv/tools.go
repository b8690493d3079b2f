package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/parleyd/parley/tools"
)

// Tool names.
const (
	GetToolName    = "kv_get"
	SetToolName    = "kv_set"
	ListToolName   = "kv_list"
	DeleteToolName = "kv_delete"
)

// listPage is how many keys one kv_list call shows.
const listPage = 200

var keyProperty = fmt.Sprintf(`"key": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "The key, such as \"todo\" or \"notes/berlin\"."}`, MaxKeyBytes)

var getSchema = json.RawMessage(`{
  "type": "object",
  "properties": {` + keyProperty + `},
  "required": ["key"],
  "additionalProperties": false
}`)

var setSchema = json.RawMessage(`{
  "type": "object",
  "properties": {` + keyProperty + `,
    "value": {"type": "string", "description": "The text to keep under the key; it replaces what the key held."}
  },
  "required": ["key", "value"],
  "additionalProperties": false
}`)

var listSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "prefix": {"type": "string", "maxLength": %d, "description": "Only keys that start with this."},
    "cursor": {"type": "string", "maxLength": 400, "description": "The cursor a previous kv_list gave, for the keys after its page."}
  },
  "additionalProperties": false
}`, MaxKeyBytes))

// keyArgs are the arguments of kv_get and kv_delete (getSchema).
type keyArgs struct {
	Key *string `json:"key"`
}

// setArgs are kv_set's arguments (setSchema).
type setArgs struct {
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// listArgs are kv_list's arguments (listSchema).
type listArgs struct {
	Prefix string `json:"prefix"`
	Cursor string `json:"cursor"`
}

// The kv tools are built in, over the daemon's *kv.Store.
func init() {
	tools.RegisterBuiltin("kv", func(deps tools.Deps) []tools.Tool { return Tools(tools.Part[*Store](deps)) })
}

// Tools returns kv_get, kv_set, kv_list and kv_delete on store. Each call
// works on the storage of the session it runs in (tools.Call.SessionID):
// no argument can name another session's.
func Tools(store *Store) []tools.Tool {
	return []tools.Tool{GetTool(store), SetTool(store), ListTool(store), DeleteTool(store)}
}

// GetTool is kv_get: read one value of the session's storage.
func GetTool(store *Store) tools.Tool {
	return tools.Tool{
		Name:        GetToolName,
		Description: "Read the value kept under a key in this conversation's storage (kv_set writes it, kv_list lists the keys).",
		Schema:      getSchema,
		Run: keyed(GetToolName, func(ctx context.Context, call tools.Call, key string) (string, error) {
			it, err := store.Get(ctx, call.SessionID, key)
			if errors.Is(err, ErrNotFound) {
				return "", fmt.Errorf("%s: this conversation's storage has no key %q; kv_list shows the keys it has", GetToolName, key)
			}
			if err != nil {
				return "", toolError(ctx, store, GetToolName, err)
			}
			if *it.Value == "" {
				return fmt.Sprintf("The value of %q is empty.", it.Key), nil
			}
			return *it.Value, nil
		}),
	}
}

// keyed is the Run of kv_get and kv_delete, whose one argument is the key
// (getSchema).
func keyed(tool string, run func(ctx context.Context, call tools.Call, key string) (string, error)) func(context.Context, tools.Call) (string, error) {
	return tools.Decoded(tool, `{"key": "..."}`, func(ctx context.Context, call tools.Call, args keyArgs) (string, error) {
		if args.Key == nil {
			return "", fmt.Errorf("%s: key is required", tool)
		}
		return run(ctx, call, *args.Key)
	})
}

// SetTool is kv_set: keep a value under a key in the session's storage.
func SetTool(store *Store) tools.Tool {
	return tools.Tool{
		Name: SetToolName,
		Description: "Keep a piece of text under a key in this conversation's storage, replacing what the key held, " +
			"to read back later in this conversation with kv_get: notes, lists, drafts, intermediate results. " +
			"Values and the storage as a whole are limited in size; the answer says how much is used.",
		Schema: setSchema,
		Run: tools.Decoded(SetToolName, `{"key": "...", "value": "..."}`, func(ctx context.Context, call tools.Call, args setArgs) (string, error) {
			if args.Key == nil || args.Value == nil {
				return "", fmt.Errorf(`%s: key and value are both required; pass {"key": "...", "value": "..."}`, SetToolName)
			}
			it, u, err := store.Set(ctx, call.SessionID, *args.Key, *args.Value)
			if err != nil {
				return "", toolError(ctx, store, SetToolName, err)
			}
			return fmt.Sprintf("Stored %q (%d bytes). This conversation's storage holds %d of %d keys and %d of %d bytes.",
				it.Key, len(*it.Value), u.Keys, u.Limits.MaxKeys, u.Bytes, u.Limits.MaxSessionBytes), nil
		}),
	}
}

// ListTool is kv_list: the keys of the session's storage.
func ListTool(store *Store) tools.Tool {
	return tools.Tool{
		Name:        ListToolName,
		Description: "List the keys in this conversation's storage, with their sizes, optionally only those starting with a prefix.",
		Schema:      listSchema,
		Run: tools.Decoded(ListToolName, `{"prefix": "..."} or {}`, func(ctx context.Context, call tools.Call, args listArgs) (string, error) {
			page, err := store.List(ctx, call.SessionID, ListOptions{Prefix: args.Prefix, Cursor: args.Cursor, Limit: listPage})
			if errors.Is(err, ErrBadCursor) {
				return "", fmt.Errorf("%s: %w", ListToolName, err)
			}
			if err != nil {
				return "", toolError(ctx, store, ListToolName, err)
			}
			u, err := store.Usage(ctx, call.SessionID)
			if err != nil {
				return "", toolError(ctx, store, ListToolName, err)
			}
			return formatList(args.Prefix, page, u), nil
		}),
	}
}

// DeleteTool is kv_delete: remove a key from the session's storage.
func DeleteTool(store *Store) tools.Tool {
	return tools.Tool{
		Name:        DeleteToolName,
		Description: "Delete a key, and its value, from this conversation's storage.",
		Schema:      getSchema,
		Run: keyed(DeleteToolName, func(ctx context.Context, call tools.Call, key string) (string, error) {
			found, err := store.Delete(ctx, call.SessionID, key)
			if err != nil {
				return "", toolError(ctx, store, DeleteToolName, err)
			}
			if !found {
				return fmt.Sprintf("There was no key %q; nothing was deleted.", key), nil
			}
			return fmt.Sprintf("Deleted %q.", key), nil
		}),
	}
}

// toolError is what the model sees of a store error: a refusal is said as
// it is; anything else is logged here, where it is handled, and told in
// short, so database details stay out of the conversation.
func toolError(ctx context.Context, store *Store, tool string, err error) error {
	for _, known := range []error{ErrInvalidKey, ErrInvalidValue, ErrValueTooLarge, ErrSessionFull} {
		if errors.Is(err, known) {
			return fmt.Errorf("%s: %w", tool, err)
		}
	}
	if errors.Is(err, ErrNoSession) {
		return fmt.Errorf("%s: this conversation's session no longer exists, so it has no storage", tool)
	}
	if ctx.Err() != nil {
		return err
	}
	store.log.ErrorContext(ctx, "session storage tool failed", "tool", tool, "error", err)
	return fmt.Errorf("%s: session storage failed; try again later", tool)
}

func formatList(prefix string, page Page, u Usage) string {
	var b strings.Builder
	what := "keys"
	if prefix != "" {
		what = fmt.Sprintf("keys starting with %q", prefix)
	}
	if len(page.Items) == 0 {
		fmt.Fprintf(&b, "No %s in this conversation's storage.", what)
	} else {
		fmt.Fprintf(&b, "%s in this conversation's storage:\n", capitalize(what))
		for _, it := range page.Items {
			fmt.Fprintf(&b, "\n- %s (%d bytes, updated %s)", it.Key, it.Size, it.UpdatedAt.Format("2006-01-02 15:04 UTC"))
		}
	}
	if page.Next != "" {
		fmt.Fprintf(&b, "\n\nMore keys follow: call %s with {\"cursor\": %q} for them, or use a longer prefix.", ListToolName, page.Next)
	}
	fmt.Fprintf(&b, "\n\nIn all: %d of %d keys, %d of %d bytes.", u.Keys, u.Limits.MaxKeys, u.Bytes, u.Limits.MaxSessionBytes)
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
