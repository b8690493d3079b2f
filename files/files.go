// Package files is the session file store: the files a session's messages
// brought (photos, documents, voice notes) and the files its agent writes
// (file_write) or sends back to the chat. Each session's files are its own
// (a tool call can only name files of the session it runs in), bounded per
// file, per session and per deployment, kept in the database so replicas
// share them, and deleted with the session. Compaction and rewind leave
// them alone; Copy gives a branch its parent's.
package files

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/sessions"
)

// Defaults of Limits: the config's (sessions.files).
const (
	DefaultMaxFileBytes    = config.DefaultFilesMaxFileBytes
	DefaultMaxSessionBytes = config.DefaultFilesMaxSessionBytes
	DefaultMaxTotalBytes   = config.DefaultFilesMaxTotalBytes
	// MaxNameBytes caps a file's name.
	MaxNameBytes = 255
)

// Limits bound what is stored. The config keys that set them are named in
// the errors a person meets.
type Limits struct {
	MaxFileBytes    int64 `json:"max_file_bytes"`    // sessions.files.max_file_bytes
	MaxSessionBytes int64 `json:"max_session_bytes"` // sessions.files.max_session_bytes
	MaxTotalBytes   int64 `json:"max_total_bytes"`   // sessions.files.max_total_bytes
}

// DefaultLimits are the limits when the config sets none.
var DefaultLimits = Limits{MaxFileBytes: DefaultMaxFileBytes, MaxSessionBytes: DefaultMaxSessionBytes, MaxTotalBytes: DefaultMaxTotalBytes}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	return l
}

// File is one stored file; Data is set only where asked for.
type File struct {
	Name      string    `json:"name"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	Data      []byte    `json:"-"`
}

// Usage is what a session stores, against the limits.
type Usage struct {
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	Limits Limits `json:"limits"`
}

var (
	// ErrNotFound means the session has no file of that name.
	ErrNotFound = errors.New("no such file")
	// ErrInvalidName means a name is empty, too long, a path, or holds
	// characters a name can't.
	ErrInvalidName = errors.New("invalid file name")
	// ErrFileTooLarge means a file is over the per-file limit.
	ErrFileTooLarge = errors.New("file too large")
	// ErrSessionFull means storing a file would take the session over its
	// limit.
	ErrSessionFull = errors.New("session file store full")
	// ErrStoreFull means storing a file would take the deployment over its
	// limit.
	ErrStoreFull = errors.New("file store full")
	// ErrNoSession means the session does not exist.
	ErrNoSession = errors.New("session not found")
)

// CheckName says what is wrong with a file name, wrapping ErrInvalidName,
// or nil. A name is 1 to MaxNameBytes bytes of printable UTF-8 without a
// slash or backslash, and not "." or "..".
func CheckName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%w: a name must not be empty or only spaces", ErrInvalidName)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: the name is %d bytes and the limit is %d; use a shorter name", ErrInvalidName, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: the name is not valid UTF-8", ErrInvalidName)
	case strings.ContainsAny(name, `/\`) || name == "." || name == "..":
		return fmt.Errorf("%w: %q is a path; use a plain file name such as \"report.csv\"", ErrInvalidName, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: the name holds a control character; use printable characters", ErrInvalidName)
	}
	return nil
}

// OutPart is the part a reply carries to send f to the chat, with caption.
func OutPart(f File, caption string) sessions.Part {
	return sessions.FilePart(f.Name, f.MediaType, sessions.FileData{Size: f.Size, Caption: caption}, "")
}

// Outgoing are the files a reply's parts carry, for the outbox: every
// file part of an assistant message is one to send.
func Outgoing(m sessions.Message) []adapters.OutFile {
	if m.Role != sessions.RoleAssistant {
		return nil
	}
	var out []adapters.OutFile
	for _, p := range m.Parts {
		d, ok := p.File()
		if !ok {
			continue
		}
		out = append(out, adapters.OutFile{Name: p.Name, MediaType: p.MediaType, Size: d.Size, Caption: d.Caption})
	}
	return out
}
