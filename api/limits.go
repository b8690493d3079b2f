package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyd/parley/llm"
)

// Default caps on what a session may hold.
const (
	DefaultMaxTitleChars    = 200
	DefaultMaxMetadataBytes = 16 << 10
)

// Limits are the caps on what a session may hold.
type Limits struct {
	MaxTitleChars    int
	MaxMetadataBytes int
}

// limits are the caps in force now, defaults filled in.
func (s *server) limits() Limits {
	var l Limits
	if s.opts.Limits != nil {
		l = s.opts.Limits()
	}
	if l.MaxTitleChars <= 0 {
		l.MaxTitleChars = DefaultMaxTitleChars
	}
	if l.MaxMetadataBytes <= 0 {
		l.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	return l
}

// checkTitle refuses a title over the configured length.
func (s *server) checkTitle(title string) error {
	if n, most := utf8.RuneCountInString(title), s.limits().MaxTitleChars; n > most {
		return badRequest(fmt.Sprintf("title is %d characters; the limit is %d (http.max_title_chars)", n, most))
	}
	return nil
}

// checkMetadata refuses metadata over the configured size, as stored.
func (s *server) checkMetadata(meta json.RawMessage) error {
	if n, most := len(meta), s.limits().MaxMetadataBytes; n > most {
		return badRequest(fmt.Sprintf("metadata is %d bytes of JSON; the limit is %d (http.max_metadata_bytes)", n, most))
	}
	return nil
}

// mergedMetadata is meta with patch merged in key by key, a null removing
// its key: what the store's Update makes of them.
func mergedMetadata(meta, patch json.RawMessage) json.RawMessage {
	obj := map[string]json.RawMessage{}
	_ = json.Unmarshal(meta, &obj)
	var p map[string]json.RawMessage
	_ = json.Unmarshal(patch, &p)
	for k, v := range p {
		if string(v) == "null" {
			delete(obj, k)
		} else {
			obj[k] = v
		}
	}
	b, _ := json.Marshal(obj)
	return b
}

// checkModel refuses a model override no provider would take, naming the
// known providers ("" is no override).
func checkModel(model string) error {
	if strings.TrimSpace(model) == "" {
		return nil
	}
	if _, _, err := llm.ParseModel(strings.TrimSpace(model)); err != nil {
		return badRequest(err.Error())
	}
	return nil
}

// metadataModel is the "model" key of a metadata object, if a string.
func metadataModel(meta json.RawMessage) (string, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(meta, &obj) != nil {
		return "", nil
	}
	v, ok := obj["model"]
	if !ok || string(v) == "null" {
		return "", nil
	}
	var m string
	if json.Unmarshal(v, &m) != nil {
		return "", badRequest(`metadata.model must be a string such as "openai/gpt-4o-mini"`)
	}
	return m, nil
}
