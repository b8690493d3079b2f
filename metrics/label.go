package metrics

import "strings"

const (
	// maxLabel caps a label value; ids and model specs are far shorter.
	maxLabel = 64
	// unknownLabel stands for an empty value, otherLabel for one that
	// doesn't look like an id or enum (so text never becomes a series).
	unknownLabel = "unknown"
	otherLabel   = "other"
)

// label returns v if it looks like an id, enum or model spec (letters,
// digits and _ . : / @ + -, at most maxLabel bytes), "unknown" if it is
// empty and "other" otherwise.
func label(v string) string {
	if v == "" {
		return unknownLabel
	}
	if len(v) > maxLabel {
		return otherLabel
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_.:/@+-", c) >= 0:
		default:
			return otherLabel
		}
	}
	return v
}

// splitSpec splits a model spec such as "openai/gpt-4o-mini" into provider
// and model labels; a bare spec ("echo") is both.
func splitSpec(spec string) (provider, model string) {
	p, m, ok := strings.Cut(spec, "/")
	if !ok || m == "" {
		m = p
	}
	return label(p), label(m)
}
