package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
)

// Defaults of the memory section.
const (
	DefaultMemoryIndex         = "builtin"
	DefaultTypesenseCollection = "parley_memory"
	DefaultTypesenseTimeout    = 5 * time.Second
)

// Memory configures long-term memory's search index.
type Memory struct {
	// Index is "builtin" (full-text search in the database) or "typesense".
	Index     string    `yaml:"index"`
	Typesense Typesense `yaml:"typesense"`
}

// Typesense is how to reach a Typesense server.
type Typesense struct {
	URL        string   `yaml:"url"`
	APIKey     Secret   `yaml:"api_key"`
	Collection string   `yaml:"collection"`
	Timeout    Duration `yaml:"timeout"`
}

// SetDefaults fills in the memory section's absent settings.
func (m *Memory) SetDefaults(set section.Set) {
	m.Index = section.Normalize(m.Index, DefaultMemoryIndex)
	m.Typesense.URL = strings.TrimSpace(m.Typesense.URL)
	m.Typesense.APIKey = Secret(strings.TrimSpace(string(m.Typesense.APIKey)))
	if strings.TrimSpace(m.Typesense.Collection) == "" {
		m.Typesense.Collection = DefaultTypesenseCollection
	}
	section.Default(&m.Typesense.Timeout, set, "typesense.timeout", Duration(DefaultTypesenseTimeout))
}

// Check reports the memory section's problems.
func (m Memory) Check(r section.Reporter) {
	switch m.Index {
	case "builtin":
	case "typesense":
		if m.Typesense.URL == "" {
			r.Add("typesense.url", `required when memory.index is "typesense"; use the server's address, such as "http://127.0.0.1:8108"`)
		} else if u, err := url.Parse(m.Typesense.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.Add("typesense.url", fmt.Sprintf(`%q is not an http(s) URL; use the server's address, such as "http://127.0.0.1:8108"`, m.Typesense.URL))
		}
		if m.Typesense.APIKey == "" {
			r.Add("typesense.api_key", `required when memory.index is "typesense"; set it from the environment, such as "${TYPESENSE_API_KEY}"`)
		}
	default:
		r.Add("index", fmt.Sprintf(`%q is not allowed; use "builtin" (full-text search in the database) or "typesense"`, m.Index))
	}
	if m.Typesense.Timeout <= 0 {
		r.Add("typesense.timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "5s"`, m.Typesense.Timeout))
	}
}
