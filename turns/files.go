package turns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/agent"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/media"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/textcut"
)

// maxFileFetchBytes is the largest document parley fetches to read: its
// text is cut to the agent's files.max_text_bytes afterwards.
const maxFileFetchBytes = 20 << 20

// readableKinds says, for a person, which files parley reads.
const readableKinds = "plain text, Markdown, CSV, JSON and PDF files"

// fileKind is how parley can read a file.
type fileKind int

const (
	fileUnreadable fileKind = iota
	fileImage               // shown to a vision model (see turnImages)
	fileText
	filePDF
)

// kindOfFile tells a file's kind from its media type, or from its name's
// extension when the platform gave no useful type.
func kindOfFile(f adapters.FileRef) fileKind {
	typ := strings.ToLower(strings.TrimSpace(f.MediaType))
	if t, _, err := mime.ParseMediaType(typ); err == nil {
		typ = t
	}
	switch {
	case media.IsImage(typ):
		return fileImage
	case typ == "application/pdf":
		return filePDF
	case strings.HasPrefix(typ, "text/"), typ == "application/json", strings.HasSuffix(typ, "+json"),
		typ == "application/x-ndjson", typ == "application/csv", typ == "application/markdown":
		return fileText
	case typ != "" && typ != "application/octet-stream":
		return fileUnreadable
	}
	switch strings.ToLower(path.Ext(f.Name)) {
	case ".txt", ".text", ".md", ".markdown", ".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".log":
		return fileText
	case ".pdf":
		return filePDF
	}
	return fileUnreadable
}

// turnFiles names the files of a turn's messages for the model, as parts
// stored with each message, with the text of those parley can read (at
// most the agent's files.max_text_bytes for the whole turn), and says in a
// line for the user what it couldn't read: a file is never dropped
// without a word.
func (b *Bridge) turnFiles(ctx context.Context, a config.Agent, ft *turnFetch) ([][]sessions.Part, []string) {
	msgs := ft.msgs
	parts := make([][]sessions.Part, len(msgs))
	var unreadable, unfetched, unreachable, unheard []string
	budget := a.Files.MaxTextBytes
	for i, m := range msgs {
		for j, f := range m.Files {
			p, problem := b.readFile(ctx, ft, i, j, &budget)
			parts[i] = append(parts[i], p)
			name := cmp.Or(f.Name, "your file")
			switch problem {
			case problemUnreadable:
				unreadable = append(unreadable, name)
			case problemUnfetched:
				unfetched = append(unfetched, name)
			case problemNoFetcher:
				unreachable = append(unreachable, name)
			case problemVoice:
				unheard = append(unheard, m.VoiceFailed)
			}
		}
	}
	var notices []string
	if len(unheard) > 0 {
		notices = append(notices, fmt.Sprintf("(I couldn't understand your voice note (reference %s), so I read only your text.)", unheard[0]))
	}
	if len(unreadable) > 0 {
		notices = append(notices, fmt.Sprintf("(I can't read %s: I read %s, and images when this agent's model can see them.)",
			joinNames(unreadable), readableKinds))
	}
	if len(unfetched) > 0 {
		notices = append(notices, fmt.Sprintf("(I couldn't open %s; please send it again.)", joinNames(unfetched)))
	}
	if len(unreachable) > 0 {
		notices = append(notices, fmt.Sprintf("(I can't open files sent this way, so I read only the name of %s.)", joinNames(unreachable)))
	}
	return parts, notices
}

// steerWithFiles is the turn's steer with each steered message's files
// named and read, as turnFiles does for the turn's own messages.
func (b *Bridge) steerWithFiles(ctx context.Context, a config.Agent, session sessions.ID, steer func() ([]adapters.Inbound, []string)) func() []agent.Input {
	return func() []agent.Input {
		var out []agent.Input
		msgs, ids := steer()
		parts, _ := b.turnFiles(ctx, a, b.newFetch(ctx, session, msgs, ids, false)) // steered in: first tries
		for i, m := range msgs {
			// Stored under its inbound id, as the turn's own inputs are, so a
			// recovery after a crash finds it.
			out = append(out, agent.Input{ID: sessions.MessageID(ids[i]), Text: m.Attributed(), DisplayName: m.DisplayName,
				RunID: b.callerRunID(m), Parts: parts[i]})
		}
		return out
	}
}

// fileProblem is what the user is told of a file.
type fileProblem int

const (
	problemNone fileProblem = iota
	problemUnreadable
	problemUnfetched
	problemNoFetcher // the channel can't fetch files
	problemVoice     // a voice note that couldn't be transcribed
)

// readFile is the part for the j-th file of the turn's i-th message:
// named always, with its name in the session's file store when it is kept
// there, and with its text when parley can read it and budget allows
// (budget is what is left of the turn's file text, and shrinks by what
// this file adds).
func (b *Bridge) readFile(ctx context.Context, ft *turnFetch, i, j int, budget *int) (sessions.Part, fileProblem) {
	m, f := ft.msgs[i], ft.msgs[i].Files[j]
	data := sessions.FileData{ID: f.ID, Size: f.Size}
	var got *fetched
	if ft.keeps() {
		// Every file is kept with its message, read or not.
		got = ft.file(i, j)
		data.Stored = got.stored
		if data.Size == 0 {
			data.Size = int64(len(got.data))
		}
	}
	part := func(text string) sessions.Part {
		if got != nil && got.keepErr != nil {
			data.Note = strings.TrimPrefix(data.Note+"; "+keepNote(got.keepErr), "; ")
		}
		return sessions.FilePart(f.Name, f.MediaType, data, text)
	}
	kind := kindOfFile(f)
	switch {
	case adapters.IsSpeech(f) && m.Transcribed:
		data.Note = gateway.TranscribedNote
		return part(""), problemNone
	case adapters.IsSpeech(f) && m.VoiceFailed != "":
		data.Note = gateway.VoiceFailedNote
		return part(""), problemVoice
	case kind == fileImage:
		return part(""), problemNone // turnImages shows it, or says why not
	case kind == fileUnreadable:
		data.Note = "parley can't read this type of file; only its name is here"
		return part(""), problemUnreadable
	case *budget <= 0:
		data.Note = "not read: past this turn's allowance of file text (files.max_text_bytes)"
		return part(""), problemNone
	}
	got = ft.file(i, j)
	if got.noFetcher {
		data.Note = "not read: parley can't fetch files from this channel"
		return part(""), problemNoFetcher
	}
	raw, err := got.data, got.err
	if errors.Is(err, adapters.ErrTooLarge) || err == nil && len(raw) > maxFileFetchBytes {
		data.Note = fmt.Sprintf("not read: over %d MB", maxFileFetchBytes>>20)
		return part(""), problemNone
	}
	if err != nil {
		b.log.WarnContext(ctx, "fetch a file for the model", "adapter", m.Adapter, "chat_id", m.ChatID, "error", err)
		data.Note = "not read: it couldn't be fetched"
		return part(""), problemUnfetched
	}
	if data.Size == 0 {
		data.Size = int64(len(raw))
	}
	var text string
	if kind == filePDF {
		text, err = pdfText(raw)
		if err != nil {
			b.log.InfoContext(ctx, "read a PDF's text", "adapter", m.Adapter, "chat_id", m.ChatID, "error", err)
			data.Note = "parley couldn't read its text (damaged or encrypted)"
			return part(""), problemUnreadable
		}
		if strings.TrimSpace(text) == "" {
			data.Note = "it has no text parley can read (scanned pages?)"
			return part(""), problemUnreadable
		}
	} else {
		text = strings.ToValidUTF8(string(raw), "\uFFFD")
	}
	if len(text) > *budget {
		text = textcut.Bytes(text, *budget, "")
		data.Note = fmt.Sprintf("only its first %s are here (files.max_text_bytes)", sessions.ByteSize(int64(len(text))))
	}
	*budget -= len(text)
	return part(text), problemNone
}

// pdfText is the text of a PDF's pages, as the file tools read it.
func pdfText(raw []byte) (string, error) { return files.PDFText(raw, maxFileFetchBytes) }

// joinNames is "a", "a and b", "a, b and c".
func joinNames(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
