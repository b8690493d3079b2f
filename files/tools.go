package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"path"
	"strings"

	"github.com/ledongthuc/pdf"

	"github.com/parleyd/parley/tools"
)

// Tool names.
const (
	ListToolName   = "file_list"
	ReadToolName   = "file_read"
	WriteToolName  = "file_write"
	DeleteToolName = "file_delete"
	SendToolName   = "send_file"
)

// MaxCaptionBytes caps a send_file caption (Telegram's is 1024 characters).
const MaxCaptionBytes = 1024

// maxReadBytes is the most text one file_read returns.
const maxReadBytes = 64 << 10

var nameProperty = fmt.Sprintf(`"name": {"type": "string", "minLength": 1, "maxLength": %d,
      "description": "The file's name, such as \"report.csv\"."}`, MaxNameBytes)

var nameSchema = json.RawMessage(`{"type": "object", "properties": {` + nameProperty + `}, "required": ["name"], "additionalProperties": false}`)

var writeSchema = json.RawMessage(`{
  "type": "object",
  "properties": {` + nameProperty + `,
    "content": {"type": "string", "description": "The file's text; it replaces a file of the same name."},
    "media_type": {"type": "string", "maxLength": 100, "description": "Its media type, such as \"text/csv\"; by default told from the name."}
  },
  "required": ["name", "content"],
  "additionalProperties": false
}`)

var sendSchema = json.RawMessage(`{
  "type": "object",
  "properties": {` + nameProperty + `,
    "caption": {"type": "string", "maxLength": 1024, "description": "A short text sent with the file."}
  },
  "required": ["name"],
  "additionalProperties": false
}`)

type sendArgs struct {
	Name    *string `json:"name"`
	Caption string  `json:"caption"`
}

var listSchema = json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)

type nameArgs struct {
	Name *string `json:"name"`
}

type writeArgs struct {
	Name      *string `json:"name"`
	Content   *string `json:"content"`
	MediaType string  `json:"media_type"`
}

// The files tools are built in, over the daemon's *files.Store.
func init() {
	tools.RegisterBuiltin("files", func(deps tools.Deps) []tools.Tool { return Tools(tools.Part[*Store](deps)) })
}

// Tools returns file_list, file_read, file_write, file_delete and
// send_file on store.
// Each call works on the files of the session it runs in
// (tools.Call.SessionID): no argument can name another session's.
func Tools(store *Store) []tools.Tool {
	return []tools.Tool{
		{
			Name:        ListToolName,
			Description: "List the files of this conversation: those people sent and those written with file_write, with their types and sizes.",
			Schema:      listSchema,
			Run: tools.Decoded(ListToolName, `{}`, func(ctx context.Context, call tools.Call, _ struct{}) (string, error) {
				list, err := store.List(ctx, call.SessionID)
				if err != nil {
					return "", toolError(ctx, store, ListToolName, err)
				}
				u, err := store.Usage(ctx, call.SessionID)
				if err != nil {
					return "", toolError(ctx, store, ListToolName, err)
				}
				if len(list) == 0 {
					return "This conversation has no files.", nil
				}
				var b strings.Builder
				b.WriteString("Files of this conversation:\n")
				for _, f := range list {
					fmt.Fprintf(&b, "\n- %s (%s, %d bytes)", f.Name, f.MediaType, f.Size)
				}
				fmt.Fprintf(&b, "\n\nIn all: %d bytes of %d.", u.Bytes, u.Limits.MaxSessionBytes)
				return b.String(), nil
			}),
		},
		{
			Name:        ReadToolName,
			Description: "Read the text of a file of this conversation (plain text, Markdown, CSV, JSON or PDF).",
			Schema:      nameSchema,
			Run: named(ReadToolName, func(ctx context.Context, call tools.Call, name string) (string, error) {
				f, err := store.Get(ctx, call.SessionID, name)
				if err != nil {
					return "", toolError(ctx, store, ReadToolName, err)
				}
				text, err := Text(f)
				if err != nil {
					return "", fmt.Errorf("%s: %w", ReadToolName, err)
				}
				if len(text) > maxReadBytes {
					text = strings.ToValidUTF8(text[:maxReadBytes], "") + fmt.Sprintf("\n[cut: only the first %d bytes of %s are shown]", maxReadBytes, name)
				}
				return text, nil
			}),
		},
		{
			Name: WriteToolName,
			Description: "Write a text file (a report as CSV, notes as Markdown) into this conversation's files, replacing one of the same name; " +
				"send_file sends it to the chat.",
			Schema: writeSchema,
			Run: tools.Decoded(WriteToolName, `{"name": "...", "content": "..."}`, func(ctx context.Context, call tools.Call, args writeArgs) (string, error) {
				if args.Name == nil || args.Content == nil {
					return "", fmt.Errorf(`%s: name and content are both required; pass {"name": "...", "content": "..."}`, WriteToolName)
				}
				typ := args.MediaType
				if typ == "" {
					typ = TypeByName(*args.Name)
				}
				f, err := store.Put(ctx, call.SessionID, *args.Name, typ, []byte(*args.Content))
				if err != nil {
					return "", toolError(ctx, store, WriteToolName, err)
				}
				return fmt.Sprintf("Wrote %s (%s, %d bytes).", f.Name, f.MediaType, f.Size), nil
			}),
		},
		{
			Name: SendToolName,
			Description: "Send a file of this conversation (one people sent, or one written with file_write) to the chat, " +
				"with your reply, with an optional caption. An image goes as a photo where the chat shows photos.",
			Schema: sendSchema,
			Run: tools.Decoded(SendToolName, `{"name": "report.csv", "caption": "..."}`, func(ctx context.Context, call tools.Call, args sendArgs) (string, error) {
				if args.Name == nil {
					return "", fmt.Errorf(`%s: name is required; pass {"name": "report.csv"}`, SendToolName)
				}
				if len(args.Caption) > MaxCaptionBytes {
					return "", fmt.Errorf("%s: the caption is %d bytes and the limit is %d; shorten it or put the rest in your reply", SendToolName, len(args.Caption), MaxCaptionBytes)
				}
				if call.Attach == nil {
					return "", fmt.Errorf("%s: files can be sent only from a conversation's turn", SendToolName)
				}
				f, err := store.Stat(ctx, call.SessionID, *args.Name)
				if err != nil {
					return "", toolError(ctx, store, SendToolName, err)
				}
				call.Attach(OutPart(f, args.Caption))
				return fmt.Sprintf("%s (%s, %d bytes) will be sent to the chat with your reply.", f.Name, f.MediaType, f.Size), nil
			}),
		},
		{
			Name:        DeleteToolName,
			Description: "Delete a file of this conversation.",
			Schema:      nameSchema,
			Run: named(DeleteToolName, func(ctx context.Context, call tools.Call, name string) (string, error) {
				found, err := store.Delete(ctx, call.SessionID, name)
				if err != nil {
					return "", toolError(ctx, store, DeleteToolName, err)
				}
				if !found {
					return fmt.Sprintf("There was no file %q; nothing was deleted.", name), nil
				}
				return fmt.Sprintf("Deleted %s.", name), nil
			}),
		},
	}
}

func named(tool string, run func(ctx context.Context, call tools.Call, name string) (string, error)) func(context.Context, tools.Call) (string, error) {
	return tools.Decoded(tool, `{"name": "..."}`, func(ctx context.Context, call tools.Call, args nameArgs) (string, error) {
		if args.Name == nil {
			return "", fmt.Errorf("%s: name is required", tool)
		}
		return run(ctx, call, *args.Name)
	})
}

// toolError is what the model sees of a store error: a refusal is said as
// it is; anything else is logged here and told in short.
func toolError(ctx context.Context, store *Store, tool string, err error) error {
	for _, known := range []error{ErrInvalidName, ErrFileTooLarge, ErrSessionFull, ErrStoreFull} {
		if errors.Is(err, known) {
			return fmt.Errorf("%s: %w", tool, err)
		}
	}
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%s: %w; file_list shows the files this conversation has", tool, err)
	}
	if errors.Is(err, ErrNoSession) {
		return fmt.Errorf("%s: this conversation's session no longer exists, so it has no files", tool)
	}
	if ctx.Err() != nil {
		return err
	}
	store.log.ErrorContext(ctx, "session file tool failed", "tool", tool, "error", err)
	return fmt.Errorf("%s: the file store failed; try again later", tool)
}

// TypeByName is the media type a file's name says, or
// application/octet-stream.
func TypeByName(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown":
		return "text/markdown"
	case ".csv":
		return "text/csv"
	case ".json":
		return "application/json"
	case ".txt", ".log":
		return "text/plain"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Text is a file's text, for a file parley reads: plain text, Markdown,
// CSV, JSON and PDF.
func Text(f File) (string, error) {
	typ, _, _ := mime.ParseMediaType(f.MediaType)
	if typ == "" || typ == "application/octet-stream" {
		typ, _, _ = mime.ParseMediaType(TypeByName(f.Name))
	}
	switch {
	case typ == "application/pdf":
		return PDFText(f.Data, DefaultMaxFileBytes)
	case strings.HasPrefix(typ, "text/"), typ == "application/json", strings.HasSuffix(typ, "+json"), typ == "application/x-ndjson":
		return strings.ToValidUTF8(string(f.Data), "\uFFFD"), nil
	}
	return "", fmt.Errorf("%s is %s, which parley can't read as text (it reads plain text, Markdown, CSV, JSON and PDF)", f.Name, f.MediaType)
}

// PDFText is the text of a PDF's pages, at most max bytes of it. The
// reader is a port of a parser for well-formed files: a damaged one may
// panic, which is an error here.
func PDFText(raw []byte, max int64) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("read pdf: %v", p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return "", fmt.Errorf("read pdf: %w", err)
	}
	rd, err := r.GetPlainText()
	if err != nil {
		return "", fmt.Errorf("read pdf text: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(rd, max))
	if err != nil {
		return "", fmt.Errorf("read pdf text: %w", err)
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(b)), "\uFFFD"), nil
}
