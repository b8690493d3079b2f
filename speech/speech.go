// Package speech is parley's voice: a thin client of the OpenAI-compatible
// audio API (OpenAI, Groq, or a local whisper.cpp, faster-whisper or
// speech server through a base URL) that turns voice notes into text
// (POST …/audio/transcriptions) and replies into speech
// (POST …/audio/speech). Every call has a deadline.
package speech

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultModel       = "whisper-1"
	DefaultSpeechModel = "tts-1"
	DefaultVoice       = "alloy"
	DefaultTimeout     = 60 * time.Second
	// DefaultMaxBytes is the largest audio sent to be transcribed: OpenAI's
	// own limit.
	DefaultMaxBytes = 25 << 20
	// DefaultMaxSeconds is the longest voice note transcribed, when its
	// platform says how long it is.
	DefaultMaxSeconds = 600
	// maxAnswerBytes bounds what a server's answer may hold (a transcript,
	// or a spoken reply's audio).
	maxAnswerBytes = 32 << 20
)

var (
	// ErrRefused: the server refused the audio or the request (a 4xx);
	// trying again won't help.
	ErrRefused = errors.New("the speech server refused the request")
	// ErrUnavailable: the server failed, or didn't answer in time.
	ErrUnavailable = errors.New("the speech server is unavailable")
	// ErrTooLarge: the audio is over the configured size or duration.
	ErrTooLarge = errors.New("the voice note is over the speech limits")
)

// Options configures a Client. Nothing is read from the environment.
type Options struct {
	// BaseURL is the server's API root, such as "https://api.openai.com/v1"
	// or "http://127.0.0.1:8000/v1".
	BaseURL string
	APIKey  string
	// Model transcribes; SpeechModel and Voice speak.
	Model       string
	SpeechModel string
	Voice       string
	// Language is an ISO-639-1 code ("de"), or "" to let the model tell.
	Language string
	// Timeout bounds each call.
	Timeout time.Duration
	// MaxBytes and MaxSeconds cap what is transcribed.
	MaxBytes   int64
	MaxSeconds int
	HTTPClient *http.Client
}

// Client calls one OpenAI-compatible audio API. It is safe for concurrent
// use.
type Client struct {
	o Options
}

// New returns a Client with o's zero fields at their defaults.
func New(o Options) *Client {
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	o.Model = cmp.Or(o.Model, DefaultModel)
	o.SpeechModel = cmp.Or(o.SpeechModel, DefaultSpeechModel)
	o.Voice = cmp.Or(o.Voice, DefaultVoice)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.MaxBytes = cmp.Or(o.MaxBytes, DefaultMaxBytes)
	o.MaxSeconds = cmp.Or(o.MaxSeconds, DefaultMaxSeconds)
	if o.HTTPClient == nil {
		o.HTTPClient = defaultClient
	}
	return &Client{o: o}
}

// defaultClient is every Client's when Options gives none. It keeps up to
// 64 idle connections per host (net/http's default is 2), so voice notes
// arriving together don't each open, and tear down, a connection to the
// speech server. Each call's deadline is its context's.
var defaultClient = &http.Client{Transport: keepAliveTransport()}

func keepAliveTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	return t
}

// MaxBytes is the largest audio Transcribe takes.
func (c *Client) MaxBytes() int64 { return c.o.MaxBytes }

// CheckLimits says whether audio of size bytes lasting seconds (0:
// unknown) may be transcribed, with an error wrapping ErrTooLarge that
// names the limit when not.
func (c *Client) CheckLimits(size int64, seconds int) error {
	if size > c.o.MaxBytes {
		return fmt.Errorf("%w: %d bytes; speech.max_bytes is %d", ErrTooLarge, size, c.o.MaxBytes)
	}
	if seconds > c.o.MaxSeconds {
		return fmt.Errorf("%w: %d seconds; speech.max_seconds is %d", ErrTooLarge, seconds, c.o.MaxSeconds)
	}
	return nil
}

// Transcribe returns the text spoken in audio (a file called name, of
// mediaType).
func (c *Client) Transcribe(ctx context.Context, audio []byte, name, mediaType string) (string, error) {
	if err := c.CheckLimits(int64(len(audio)), 0); err != nil {
		return "", err
	}
	// The form's fields, then the file's part, whose bytes are audio's
	// own (not copied into the body), then the form's end.
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	_ = w.WriteField("model", c.o.Model)
	_ = w.WriteField("response_format", "json")
	if c.o.Language != "" {
		_ = w.WriteField("language", c.o.Language)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, cmp.Or(name, "audio.ogg")))
	h.Set("Content-Type", cmp.Or(mediaType, "application/octet-stream"))
	if _, err := w.CreatePart(h); err != nil {
		return "", fmt.Errorf("build transcription request: %w", err)
	}
	head := form.Len()
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("build transcription request: %w", err)
	}
	raw, _, err := c.post(ctx, "/audio/transcriptions", w.FormDataContentType(), form.Bytes()[:head], audio, form.Bytes()[head:])
	if err != nil {
		return "", fmt.Errorf("transcribe %s: %w", cmp.Or(name, "audio"), err)
	}
	var out struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("transcribe %s: %w: the answer is not the JSON {\"text\": …}", cmp.Or(name, "audio"), ErrUnavailable)
	}
	return strings.TrimSpace(out.Text), nil
}

// Synthesize speaks text, as Ogg Opus (the voice notes of Telegram and
// WhatsApp): the audio and its media type.
func (c *Client) Synthesize(ctx context.Context, text string) ([]byte, string, error) {
	req, _ := json.Marshal(map[string]string{"model": c.o.SpeechModel, "voice": c.o.Voice, "input": text, "response_format": "opus"})
	raw, typ, err := c.post(ctx, "/audio/speech", "application/json", req)
	if err != nil {
		return nil, "", fmt.Errorf("synthesize speech: %w", err)
	}
	if len(raw) == 0 {
		return nil, "", fmt.Errorf("synthesize speech: %w: the answer held no audio", ErrUnavailable)
	}
	if typ == "" || typ == "application/octet-stream" || typ == "audio/opus" {
		typ = "audio/ogg"
	}
	return raw, typ, nil
}

// post sends one request, its body the pieces one after the other, within
// the timeout and returns the answer's body and media type.
func (c *Client) post(ctx context.Context, path, contentType string, pieces ...[]byte) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	body := func() io.Reader { return &piecesReader{p: pieces} }
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.BaseURL+path, body())
	if err != nil {
		return nil, "", fmt.Errorf("%w: speech.base_url %q is not a usable URL", ErrRefused, c.o.BaseURL)
	}
	for _, p := range pieces {
		req.ContentLength += int64(len(p))
	}
	// Sent again as it was when a kept connection turns out closed.
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body()), nil }
	req.Header.Set("Content-Type", contentType)
	if c.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("%w: no answer within %s (speech.timeout)", ErrUnavailable, c.o.Timeout)
		}
		return nil, "", fmt.Errorf("%w: %s", ErrUnavailable, c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: read the answer: %s", ErrUnavailable, c.scrub(err.Error()))
	}
	if len(raw) > maxAnswerBytes {
		return nil, "", fmt.Errorf("%w: the answer is over %d MB", ErrUnavailable, maxAnswerBytes>>20)
	}
	if resp.StatusCode/100 != 2 {
		kind := ErrUnavailable
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests {
			kind = ErrRefused
		}
		return nil, "", fmt.Errorf("%w: HTTP %d: %s", kind, resp.StatusCode, c.scrub(snippet(raw)))
	}
	typ, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	return raw, strings.TrimSpace(typ), nil
}

// piecesReader reads its byte slices one after the other, leaving them
// as they are. Its WriteTo writes each as it is: io.MultiReader's
// allocates a 32 KiB buffer per request to copy through.
type piecesReader struct {
	p   [][]byte
	off int // into p[0]
}

func (r *piecesReader) Read(b []byte) (int, error) {
	for len(r.p) > 0 && r.off == len(r.p[0]) {
		r.p, r.off = r.p[1:], 0
	}
	if len(r.p) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.p[0][r.off:])
	r.off += n
	return n, nil
}

func (r *piecesReader) WriteTo(w io.Writer) (int64, error) {
	var sum int64
	for ; len(r.p) > 0; r.p, r.off = r.p[1:], 0 {
		n, err := w.Write(r.p[0][r.off:])
		sum += int64(n)
		r.off += n
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// scrub keeps the API key out of an error's text.
func (c *Client) scrub(s string) string {
	if c.o.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.o.APIKey, "[redacted]")
}

// snippet is the start of an error answer, for the operator's log.
func snippet(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}
