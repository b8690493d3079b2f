package memory

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyd/parley/sessions"
)

// ItemID identifies a memory item (a UUIDv7 string).
type ItemID string

// Kind says where an item came from.
type Kind string

const (
	// KindMemory is a fact the agent saved with memory_write.
	KindMemory Kind = "memory"
	// KindSummary is a compaction summary of a session's older messages.
	KindSummary Kind = "summary"
)

// Limits on what an item may hold.
const (
	// MaxContentRunes caps a memory's content, in characters.
	MaxContentRunes = 8000
	// MaxSummaryRunes caps a compaction summary, in characters: summaries
	// aim at about 500 words, but a chunked summary can run longer.
	MaxSummaryRunes = 32000
	// MaxTags caps the tags on one memory.
	MaxTags = 10
	// MaxTagRunes caps one tag, in characters.
	MaxTagRunes = 64
)

// Search limits.
const (
	DefaultSearchLimit = 5
	MaxSearchLimit     = 20
)

// Item is one stored memory or compaction summary.
type Item struct {
	ID      ItemID   `json:"id"`
	Kind    Kind     `json:"kind"`
	Scope   Scope    `json:"scope"`
	Content string   `json:"content"`
	Tags    []string `json:"tags,omitempty"`
	// SessionID and MessageID are where the item came from: the session that
	// wrote a memory, or the session and summary message of a compaction.
	SessionID sessions.ID        `json:"session_id,omitempty"`
	MessageID sessions.MessageID `json:"message_id,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
}

func (it Item) doc() Doc {
	return Doc{ID: it.ID, Kind: it.Kind, Scope: it.Scope, Content: it.Content, Tags: it.Tags,
		SessionID: string(it.SessionID), CreatedAt: it.CreatedAt}
}

// Memory is a new memory to store.
type Memory struct {
	Content   string
	Tags      []string
	SessionID sessions.ID
	MessageID sessions.MessageID
}

// Summary is a compaction summary to make searchable. MessageID is the
// summary message compaction inserted; indexing the same one again updates
// it rather than adding a second item.
type Summary struct {
	SessionID sessions.ID
	MessageID sessions.MessageID
	Content   string
}

// Result is one search result: the item and how well it matched (higher is
// better, comparable only within one search).
type Result struct {
	Item
	Score float64 `json:"score"`
}

// cleanContent trims content and checks it against max characters.
func cleanContent(content string, max int) (string, error) {
	content = strings.TrimSpace(content)
	if content == "" {
		return "", fmt.Errorf("%w: content is empty; write the fact to remember as text", ErrInvalid)
	}
	if !utf8.ValidString(content) || strings.ContainsRune(content, 0) {
		return "", fmt.Errorf("%w: content is not valid UTF-8 text (or holds a NUL byte)", ErrInvalid)
	}
	if n := utf8.RuneCountInString(content); n > max {
		return "", fmt.Errorf("%w: content is %d characters and the limit is %d; save a shorter note, or split it into several memories", ErrInvalid, n, max)
	}
	return content, nil
}

// cleanTags trims tags, drops repeats and checks the limits.
func cleanTags(tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, fmt.Errorf("%w: %d tags given and the limit is %d; keep the most useful ones", ErrInvalid, len(tags), MaxTags)
	}
	out := make([]string, 0, len(tags))
	seen := map[string]bool{}
	for i, t := range tags {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
			return nil, fmt.Errorf("%w: tag %d is empty; give each tag a word or drop it", ErrInvalid, i+1)
		case !utf8.ValidString(t) || strings.IndexFunc(t, unicode.IsControl) >= 0:
			return nil, fmt.Errorf("%w: tag %d holds invalid UTF-8 or control characters", ErrInvalid, i+1)
		case utf8.RuneCountInString(t) > MaxTagRunes:
			return nil, fmt.Errorf("%w: tag %d is %d characters and the limit is %d", ErrInvalid, i+1, utf8.RuneCountInString(t), MaxTagRunes)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}
