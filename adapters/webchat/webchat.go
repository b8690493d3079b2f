// Package webchat is the web chat page: one small page, embedded in the
// binary, that talks to an agent through the HTTP API (its conversations
// are the API sessions of the user "webchat", replies streamed over
// server-sent events). It has no dependencies and no build step, and
// keeps the API token the user types in the browser's storage.
package webchat

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

//go:embed index.html
var page []byte

// CSP is the page's Content-Security-Policy: its own inline script and
// style only (by hash, so an injected one never runs), requests to its own
// origin only, images from its own origin or from blob: URLs (a thumbnail
// is a file fetched with the token in a header, shown from a blob, so the
// token never goes in a URL), and no framing (a framing page could drive
// the chat with the token this browser keeps).
var CSP = "default-src 'none'; script-src " + inlineHash("script") + "; style-src " + inlineHash("style") +
	"; connect-src 'self'; img-src 'self' blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash is the CSP source of the page's one <tag> element's content.
func inlineHash(tag string) string {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	i := bytes.Index(page, open)
	j := bytes.Index(page, end)
	if i < 0 || j < i {
		return "'none'"
	}
	sum := sha256.Sum256(page[i+len(open) : j])
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// gzipped is the page compressed once, for the browsers that accept gzip
// (all of them): the page is sent in about a third of its bytes.
var gzipped = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(page)
	_ = zw.Close()
	return b.Bytes()
})

// acceptsGzip reports whether a request's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(v), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q, isQ := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if f, err := strconv.ParseFloat(q, 64); isQ && err == nil && f == 0 {
			return false
		}
		return true
	}
	return false
}

// Handler serves the page at GET /.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			_, _ = w.Write(gzipped())
			return
		}
		_, _ = w.Write(page)
	})
}
