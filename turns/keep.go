package turns

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
)

// fetched is one file of a turn's message as the turn has it.
type fetched struct {
	data []byte
	typ  string
	err  error
	// noFetcher says the channel can't fetch files.
	noFetcher bool
	// stored is the file's name in the session's file store, "" when it
	// isn't kept there (no store, or a limit refused it: keepErr).
	stored  string
	keepErr error
}

// turnFetch fetches each file of a turn's messages at most once: from the
// session's file store when an earlier try of the turn (before a crash)
// kept it, else from its channel, and then keeps it there, under a name
// made from the message's id, so history, a replay, a rewind and a branch
// read the same bytes.
type turnFetch struct {
	b       *Bridge
	ctx     context.Context
	session sessions.ID
	msgs    []adapters.Inbound
	ids     []string
	got     map[[2]int]*fetched
	// rerun: a try before this one may have kept the files
	// (gateway.TurnInput.Rerun); only then is the store looked in first.
	rerun bool
}

func (b *Bridge) newFetch(ctx context.Context, session sessions.ID, msgs []adapters.Inbound, ids []string, rerun bool) *turnFetch {
	return &turnFetch{b: b, ctx: ctx, session: session, msgs: msgs, ids: ids, got: map[[2]int]*fetched{}, rerun: rerun}
}

// keeps says whether files are kept in the session's store: then every
// file is fetched, needed by the turn or not.
func (f *turnFetch) keeps() bool { return f.b.o.Files != nil && f.session != "" }

// file is the j-th file of the i-th message.
func (f *turnFetch) file(i, j int) *fetched {
	key := [2]int{i, j}
	if got, ok := f.got[key]; ok {
		return got
	}
	got := f.fetch(i, j)
	f.got[key] = got
	return got
}

func (f *turnFetch) fetch(i, j int) *fetched {
	m, ref := f.msgs[i], f.msgs[i].Files[j]
	id := m.MessageID
	if i < len(f.ids) {
		id = f.ids[i]
	}
	store := f.b.o.Files
	name := storedName(ref, id, j)
	// Only a rerun can find a file kept by an earlier try; a file in hand
	// (a voice note's audio, fetched to transcribe it) is the one that
	// try would have kept: no need to look.
	if f.keeps() && f.rerun && ref.Data == nil {
		if kept, err := store.Get(f.ctx, f.session, name); err == nil {
			return &fetched{data: kept.Data, typ: kept.MediaType, stored: name}
		} else if !errors.Is(err, files.ErrNotFound) {
			f.b.log.WarnContext(f.ctx, "read a message's file from the session's store", "session_id", f.session, "file", name, "error", err)
		}
	}
	data, typ := ref.Data, "" // fetched already, to transcribe it
	if data == nil {
		fetcher := f.b.capabilities(m.Adapter).Fetch
		if fetcher == nil {
			return &fetched{noFetcher: true}
		}
		limit := int64(maxFileFetchBytes)
		if f.keeps() {
			limit = max(limit, store.Limits().MaxFileBytes)
		}
		var err error
		if data, typ, err = fetcher.Fetch(f.ctx, ref, limit); err != nil {
			return &fetched{err: err}
		}
	}
	typ = mediaTypeOf(ref.MediaType, typ)
	out := &fetched{data: data, typ: typ}
	if f.keeps() {
		if _, err := store.Put(f.ctx, f.session, name, typ, data); err != nil {
			f.b.log.WarnContext(f.ctx, "keep a message's file in the session's store", "session_id", f.session, "file", name, "error", err)
			out.keepErr = err
		} else {
			out.stored = name
		}
	}
	return out
}

// keepNote says, for the model, why a file isn't kept with its message.
func keepNote(err error) string {
	switch {
	case errors.Is(err, files.ErrFileTooLarge):
		return "not kept for later turns: over sessions.files.max_file_bytes"
	case errors.Is(err, files.ErrSessionFull), errors.Is(err, files.ErrStoreFull):
		return "not kept for later turns: the session's file store is full"
	}
	return "not kept for later turns"
}

// mediaTypeOf is the platform's media type of a file when it says
// something, else what the fetch answered.
func mediaTypeOf(platform, fetched string) string {
	p := strings.ToLower(strings.TrimSpace(platform))
	if p != "" && p != "application/octet-stream" {
		return platform
	}
	return cmp.Or(fetched, platform, "application/octet-stream")
}

// storedName is the name a message's file is kept under in the session's
// store: the platform's name (or "photo.jpg", "file") with a tag made from
// the message and the file, so two photos named photo.jpg don't collide
// and a re-run of the turn finds the one it kept.
func storedName(ref adapters.FileRef, messageID string, j int) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || unicode.IsControl(r) {
			return '_'
		}
		return r
	}, strings.TrimSpace(ref.Name))
	if name == "" || name == "." || name == ".." {
		name = "file"
		if strings.HasPrefix(strings.ToLower(ref.MediaType), "image/") {
			name = "photo"
		}
	}
	ext := path.Ext(name)
	if len(ext) > 16 {
		ext = ""
	}
	stem := strings.TrimSuffix(name, ext)
	if len(stem) > 200 {
		stem = strings.ToValidUTF8(stem[:200], "")
	}
	sum := sha256.Sum256([]byte(messageID + "\x00" + strconv.Itoa(j) + "\x00" + ref.ID))
	return stem + "-" + hex.EncodeToString(sum[:4]) + ext
}
