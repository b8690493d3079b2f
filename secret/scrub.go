package secret

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinScrubLen is the shortest value a Scrubber hides: shorter ones (a
// flag, a port, a name) are not tokens, and hiding them would garble text.
const MinScrubLen = 8

// Scrubber replaces known secret values with "[redacted]" in text, in
// every form a value takes on its way: as it is, JSON-escaped (with and
// without HTML escaping, once and twice, as a string inside a string),
// and URL-escaped. It is safe for concurrent use; the zero value and nil
// hide nothing.
type Scrubber struct {
	mu     sync.Mutex
	values map[string]bool
	r      atomic.Pointer[strings.Replacer]
}

// NewScrubber returns a Scrubber hiding values.
func NewScrubber(values ...string) *Scrubber {
	s := &Scrubber{}
	s.Add(values...)
	return s
}

// Add makes the Scrubber hide values too. For a value with a space
// ("Bearer <token>"), its last word is hidden as well.
func (s *Scrubber) Add(values ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]bool{}
	}
	added := false
	for _, v := range values {
		v = strings.TrimSpace(v)
		words := []string{v}
		if i := strings.LastIndexAny(v, " \t"); i >= 0 {
			words = append(words, v[i+1:])
		}
		for _, w := range words {
			if len(w) >= MinScrubLen && !s.values[w] {
				s.values[w] = true
				added = true
			}
		}
	}
	if !added {
		return
	}
	forms := map[string]bool{}
	for v := range s.values {
		for _, f := range Forms(v) {
			forms[f] = true
		}
	}
	list := make([]string, 0, len(forms))
	for f := range forms {
		list = append(list, f)
	}
	// The longest form first: where forms overlap, all of it goes.
	slices.SortFunc(list, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	pairs := make([]string, 0, 2*len(list))
	for _, f := range list {
		pairs = append(pairs, f, Redacted)
	}
	s.r.Store(strings.NewReplacer(pairs...))
}

// Scrub is text with every known value, in every form, replaced by
// "[redacted]".
func (s *Scrubber) Scrub(text string) string {
	if s == nil {
		return text
	}
	r := s.r.Load()
	if r == nil || text == "" {
		return text
	}
	return r.Replace(text)
}

// Forms are the ways v can appear in text: itself, JSON-escaped (HTML
// escaping on and off, once and twice) and URL-escaped.
func Forms(v string) []string {
	out := []string{v}
	add := func(f string) {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, html := range []bool{true, false} {
		once := jsonEscape(v, html)
		add(once)
		add(jsonEscape(once, html))
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	return out
}

// jsonEscape is v as it appears inside a JSON string.
func jsonEscape(v string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}

// Handler wraps h so that every log line has the Scrubber's values
// hidden: in its message and in every attribute, errors and values that
// print themselves included.
func (s *Scrubber) Handler(h slog.Handler) slog.Handler {
	return &scrubHandler{h: h, s: s}
}

type scrubHandler struct {
	h slog.Handler
	s *Scrubber
}

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.s.r.Load() == nil {
		return h.h.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, h.s.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &scrubHandler{h: h.h.WithAttrs(clean), s: h.s}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{h: h.h.WithGroup(name), s: h.s}
}

// attr is a with the values hidden.
func (h *scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.s.Scrub(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if clean := h.s.Scrub(text); clean != text {
			return slog.String(a.Key, clean)
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
