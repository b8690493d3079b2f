package gateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode"

	"github.com/parleyd/parley/adapters"
)

// A Transcriber turns voice notes into text (package speech over an
// OpenAI-compatible audio API).
type Transcriber interface {
	// CheckLimits says whether audio of size bytes lasting seconds (0:
	// unknown) may be transcribed.
	CheckLimits(size int64, seconds int) error
	// MaxBytes is the largest audio Transcribe takes.
	MaxBytes() int64
	Transcribe(ctx context.Context, audio []byte, name, mediaType string) (string, error)
}

// voiceNotUnderstood is what a chat is told of a voice note that couldn't
// be transcribed; the message itself is kept.
const voiceNotUnderstood = "I couldn't understand that voice note (reference %s). Please try again, or type your message."

// transcribe is in with its voice notes transcribed, before it is stored,
// gated or run: the transcript follows any caption in Text, and a spoken
// mention of the bot at the start addresses it in a group. A voice note
// that can't be transcribed leaves in.VoiceFailed set to the reference of
// the log line that says why; the message goes on either way.
func (g *Gateway) transcribe(ctx context.Context, in adapters.Inbound) adapters.Inbound {
	tr := g.opts.Transcriber
	if tr == nil || in.Transcribed || in.VoiceFailed != "" {
		return in
	}
	var texts []string
	var failure error
	in.Files = slices.Clone(in.Files) // the fetched audio goes on this copy
	for i, f := range in.Files {
		if !adapters.IsSpeech(f) {
			continue
		}
		text, err := g.transcribeFile(ctx, tr, in, &in.Files[i])
		if err != nil {
			failure = err
			continue
		}
		texts = append(texts, text)
	}
	if failure != nil {
		in.VoiceFailed = newRef()
		g.opts.Log.WarnContext(ctx, "transcribe a voice note", "ref", in.VoiceFailed, "adapter", in.Adapter,
			"chat_id", in.ChatID, "message_id", in.MessageID, "error", failure)
	}
	if len(texts) == 0 {
		return in
	}
	spoken := strings.Join(texts, "\n")
	in.Text = strings.TrimSpace(strings.TrimSpace(in.Text) + "\n" + spoken)
	in.Transcribed = true
	if in.Group && !in.Mentioned {
		in.Mentioned = g.spokenMention(in.Adapter, spoken)
	}
	return in
}

// errNothingHeard: the transcript of a voice note is empty.
var errNothingHeard = errors.New("the transcript is empty: no speech was heard")

// transcribeFile fetches f and transcribes it; the audio stays on f
// (FileRef.Data), for the turn to keep without fetching it again.
func (g *Gateway) transcribeFile(ctx context.Context, tr Transcriber, in adapters.Inbound, f *adapters.FileRef) (string, error) {
	if err := tr.CheckLimits(f.Size, f.Seconds); err != nil {
		return "", err
	}
	ad, _ := g.opts.Channels.Adapter(in.Adapter)
	fetcher, ok := ad.(adapters.Fetcher)
	if !ok {
		return "", errors.New("the channel can't fetch files")
	}
	data, typ, err := fetcher.Fetch(ctx, *f, tr.MaxBytes())
	if err != nil {
		return "", err
	}
	if typ == "" || typ == "application/octet-stream" {
		typ = f.MediaType
	}
	f.Data = data
	if f.MediaType == "" {
		f.MediaType = typ
	}
	text, err := tr.Transcribe(ctx, data, f.Name, typ)
	if err == nil && text == "" {
		err = errNothingHeard
	}
	return text, err
}

// spokenMention reports whether a transcript begins by addressing the bot:
// "@name …", or its name said as words ("Family bot, what …", "Family,
// what …" for family_bot).
func (g *Gateway) spokenMention(id adapters.ID, spoken string) bool {
	ad, _ := g.opts.Channels.Adapter(id)
	namer, ok := ad.(adapters.Namer)
	if !ok {
		return false
	}
	said := spokenWords(spoken)
	for _, name := range namer.BotNames() {
		words := spokenWords(strings.NewReplacer("_", " ", "-", " ").Replace(name))
		if len(words) == 0 {
			continue
		}
		if len(said) > 0 && said[0] == strings.Join(words, "") {
			return true // "@family_bot", heard as one word
		}
		if len(words) > 1 && words[len(words)-1] == "bot" && startsWith(said, words[:len(words)-1]) {
			return true
		}
		if startsWith(said, words) {
			return true
		}
	}
	return false
}

// spokenWords are s's words, lowercased, without punctuation.
func spokenWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func startsWith(said, words []string) bool {
	if len(said) < len(words) {
		return false
	}
	for i, w := range words {
		if said[i] != w {
			return false
		}
	}
	return true
}
