package discord

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/parleyd/parley/adapters"
)

var _ adapters.Fetcher = (*Adapter)(nil)

// cdnHosts are where Discord serves attachments. A file ref pointing
// anywhere else is not fetched, so a forged ref can't make parley fetch
// an arbitrary address.
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// Fetch implements adapters.Fetcher: it downloads an attachment from
// Discord's CDN by the URL the message carried (a signed link, no token
// needed). A file over maxBytes (0: no limit) is refused by its declared
// size before any request, or by the response's, before it is all read.
func (a *Adapter) Fetch(ctx context.Context, ref adapters.FileRef, maxBytes int64) ([]byte, string, error) {
	if maxBytes > 0 && ref.Size > maxBytes {
		return nil, "", fmt.Errorf("discord attachment %s is %d bytes, over %d: %w", ref.ID, ref.Size, maxBytes, adapters.ErrTooLarge)
	}
	u, err := url.Parse(ref.URL)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("discord attachment %s has no download link: %w", ref.ID, adapters.ErrUnsupported)
	}
	if !a.fetchable(u) {
		return nil, "", fmt.Errorf("discord attachment %s: %s is not Discord's CDN; not fetched", ref.ID, u.Redacted())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("discord attachment %s: %w", ref.ID, err)
	}
	req.Header.Set("User-Agent", a.s.UserAgent)
	resp, err := a.files.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("discord attachment %s download: %w", ref.ID, redact(err, a.token))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden:
		return nil, "", fmt.Errorf("discord attachment %s: HTTP %d; the file was deleted or its link expired (links last about a day)", ref.ID, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("discord attachment %s: HTTP %d", ref.ID, resp.StatusCode)
	case maxBytes > 0 && resp.ContentLength > maxBytes:
		return nil, "", fmt.Errorf("discord attachment %s is %d bytes, over %d: %w", ref.ID, resp.ContentLength, maxBytes, adapters.ErrTooLarge)
	}
	r := io.Reader(resp.Body)
	if maxBytes > 0 {
		r = io.LimitReader(resp.Body, maxBytes+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, "", fmt.Errorf("discord attachment %s download: %w", ref.ID, redact(err, a.token))
	}
	if maxBytes > 0 && int64(len(data)) > maxBytes {
		return nil, "", fmt.Errorf("discord attachment %s is over %d bytes: %w", ref.ID, maxBytes, adapters.ErrTooLarge)
	}
	mediaType := ref.MediaType
	if mediaType == "" {
		mediaType, _, _ = strings.Cut(resp.Header.Get("Content-Type"), ";")
	}
	if mediaType == "" || mediaType == "application/octet-stream" {
		mediaType, _, _ = strings.Cut(http.DetectContentType(data), ";")
	}
	return data, strings.TrimSpace(mediaType), nil
}

// fetchable says whether u is on Discord's CDN, or on api_url's host (a
// proxy, or the fake in tests).
func (a *Adapter) fetchable(u *url.URL) bool {
	if api := a.set.api; api != nil && u.Scheme == api.Scheme && u.Host == api.Host {
		return true
	}
	return u.Scheme == "https" && cdnHosts[strings.ToLower(u.Hostname())]
}

// newFileClient is the client for attachments: no token, and redirects
// only to where a download may come from.
func (a *Adapter) newFileClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 || !a.fetchable(req.URL) {
				return fmt.Errorf("redirected to %s: not followed", req.URL.Redacted())
			}
			return nil
		},
	}
}
