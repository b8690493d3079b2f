package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyd/parley/textcut"
	"github.com/parleyd/parley/tools"
)

// Tool names.
const (
	WriteToolName  = "memory_write"
	SearchToolName = "memory_search"
)

// maxHitRunes caps how much of one result memory_search shows, so twenty
// long summaries can't flood the model's context.
const maxHitRunes = 2000

// maxQueryRunes caps a memory_search query.
const maxQueryRunes = 1000

var writeSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "content": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "The fact to remember, written to make sense on its own later: who, what, when."},
    "tags": {"type": "array", "maxItems": %d, "items": {"type": "string", "minLength": 1, "maxLength": %d},
      "description": "Optional short labels, such as a topic or a person's name."}
  },
  "required": ["content"],
  "additionalProperties": false
}`, MaxContentRunes, MaxTags, MaxTagRunes))

// writeArgs are memory_write's arguments (writeSchema).
type writeArgs struct {
	Content *string  `json:"content"`
	Tags    []string `json:"tags"`
}

var searchSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "Plain words to look for, such as names, topics or keywords."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d,
      "description": "How many results to return; default %d."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, maxQueryRunes, MaxSearchLimit, DefaultSearchLimit))

// searchArgs are memory_search's arguments (searchSchema).
type searchArgs struct {
	Query *string `json:"query"`
	Limit *int    `json:"limit"`
}

// The memory tools are built in, over the daemon's *memory.Store.
func init() {
	tools.RegisterBuiltin("memory", func(deps tools.Deps) []tools.Tool { return Tools(tools.Part[*Store](deps)) })
}

// Tools returns memory_write and memory_search on store. Each call works in
// the scope of the calling session, ScopeOf(call.Key): a tool can't name
// another scope.
func Tools(store *Store) []tools.Tool {
	return []tools.Tool{WriteTool(store), SearchTool(store)}
}

// WriteTool is memory_write: store a memory in the session's scope.
func WriteTool(store *Store) tools.Tool {
	return tools.Tool{
		Name: WriteToolName,
		Description: "Save a fact to long-term memory, so it can be found in later conversations with this user " +
			"(or this group) with memory_search. Save durable things: preferences, names, decisions, commitments.",
		Schema: writeSchema,
		Run: tools.Decoded(WriteToolName, `{"content": "...", "tags": ["..."]}`, func(ctx context.Context, call tools.Call, args writeArgs) (string, error) {
			if args.Content == nil {
				return "", fmt.Errorf("%s: content is required: the fact to remember", WriteToolName)
			}
			it, err := store.Write(ctx, ScopeOf(call.Key), Memory{Content: *args.Content, Tags: args.Tags, SessionID: call.SessionID})
			if err != nil {
				return "", toolError(ctx, store, WriteToolName, err)
			}
			msg := "Saved memory " + string(it.ID)
			if len(it.Tags) > 0 {
				msg += " (tags: " + strings.Join(it.Tags, ", ") + ")"
			}
			return msg + ".", nil
		}),
	}
}

// SearchTool is memory_search: find memories and compaction summaries in
// the session's scope.
func SearchTool(store *Store) tools.Tool {
	return tools.Tool{
		Name: SearchToolName,
		Description: "Search long-term memory (facts saved with memory_write and summaries of earlier " +
			"conversation) of this user or group. Returns the best matches first, with where each came from.",
		Schema: searchSchema,
		Run: tools.Decoded(SearchToolName, fmt.Sprintf(`{"query": "...", "limit": %d}`, DefaultSearchLimit), func(ctx context.Context, call tools.Call, args searchArgs) (string, error) {
			if args.Query == nil || strings.TrimSpace(*args.Query) == "" {
				return "", fmt.Errorf("%s: query is required: plain words to look for", SearchToolName)
			}
			if n := utf8.RuneCountInString(*args.Query); n > maxQueryRunes {
				return "", fmt.Errorf("%s: query is %d characters and the limit is %d; use a few key words", SearchToolName, n, maxQueryRunes)
			}
			limit := DefaultSearchLimit
			if args.Limit != nil {
				if *args.Limit < 1 || *args.Limit > MaxSearchLimit {
					return "", fmt.Errorf("%s: limit %d is out of range; use 1 to %d", SearchToolName, *args.Limit, MaxSearchLimit)
				}
				limit = *args.Limit
			}
			if parseQuery(*args.Query).empty() {
				return "", fmt.Errorf("%s: the query %q has no words to search for; use plain words such as names or topics", SearchToolName, *args.Query)
			}
			results, err := store.Search(ctx, ScopeOf(call.Key), *args.Query, limit)
			if err != nil {
				return "", toolError(ctx, store, SearchToolName, err)
			}
			return formatResults(*args.Query, results), nil
		}),
	}
}

// toolError is what the model sees of a store error. Bad input is explained
// as it is; anything else is logged here, where it is handled, and told in
// short, so index hosts and database details stay out of the conversation.
func toolError(ctx context.Context, store *Store, tool string, err error) error {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrInvalidScope) {
		return fmt.Errorf("%s: %w", tool, err)
	}
	store.log.ErrorContext(ctx, "memory tool failed", "tool", tool, "index", store.index.Name(), "error", err)
	if errors.Is(err, ErrIndexUnavailable) {
		return fmt.Errorf("%s: the memory search index is unavailable right now; try again later", tool)
	}
	return fmt.Errorf("%s: the memory store failed; try again later", tool)
}

func formatResults(q string, results []Result) string {
	if len(results) == 0 {
		return fmt.Sprintf("No memories match %q.", q)
	}
	var b strings.Builder
	noun := "memories"
	if len(results) == 1 {
		noun = "memory"
	}
	fmt.Fprintf(&b, "%d %s match %q, best first:\n", len(results), noun, q)
	for i, r := range results {
		fmt.Fprintf(&b, "\n%d. [%s] %s", i+1, r.Kind, r.CreatedAt.Format("2006-01-02"))
		if r.SessionID != "" {
			fmt.Fprintf(&b, ", from session %s", r.SessionID)
		}
		fmt.Fprintf(&b, " (id %s)\n", r.ID)
		content := r.Content
		if n := utf8.RuneCountInString(content); n > maxHitRunes {
			content = textcut.Runes(content, maxHitRunes, fmt.Sprintf(" [… %d more characters]", n-maxHitRunes))
		}
		b.WriteString("   " + strings.ReplaceAll(content, "\n", "\n   ") + "\n")
		if len(r.Tags) > 0 {
			b.WriteString("   tags: " + strings.Join(r.Tags, ", ") + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
