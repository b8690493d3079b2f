package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/discord/discordtest"
)

func TestSend(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	ctx := waitCtx(t)

	if a.MaxMessageLength() != 2000 {
		t.Errorf("MaxMessageLength = %d, want 2000", a.MaxMessageLength())
	}

	sent, err := a.Send(ctx, adapters.Outbound{Adapter: "dc-test", ChatID: chanID, Text: "hello <@" + userID + ">", ReplyTo: "5001", IdempotencyKey: "reply-1:0"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Sent()
	if len(msgs) != 1 {
		t.Fatalf("sent %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if sent.MessageID != m.ID || m.ChannelID != chanID || m.Content != "hello <@"+userID+">" {
		t.Errorf("Send = %+v; the fake got %+v", sent, m)
	}
	if r := m.MessageReference; r == nil || r.MessageID != "5001" || r.ChannelID != chanID || r.FailIfNotExists == nil || *r.FailIfNotExists {
		t.Errorf("message_reference = %+v, want message 5001 in %s, fail_if_not_exists false", r, chanID)
	}
	if len(m.Nonce) == 0 || len(m.Nonce) > 25 || !m.EnforceNonce {
		t.Errorf("nonce %q enforce %v, want a nonce of at most 25 characters, enforced", m.Nonce, m.EnforceNonce)
	}
	if am := m.AllowedMentions; am == nil || strings.Join(am.Parse, ",") != "users" || !am.RepliedUser {
		t.Errorf("allowed_mentions = %+v, want users and the replied user only", am)
	}

	// The same reply again (a retry after a lost response) is not posted twice.
	again, err := a.Send(ctx, adapters.Outbound{ChatID: chanID, Text: "hello <@" + userID + ">", ReplyTo: "5001", IdempotencyKey: "reply-1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if again.MessageID != sent.MessageID || len(srv.Sent()) != 1 {
		t.Errorf("retry made message %s (%d sent), want the first one %s", again.MessageID, len(srv.Sent()), sent.MessageID)
	}

	// The longest message Discord takes, in characters not bytes.
	long := strings.Repeat("é", 2000)
	if _, err := a.Send(ctx, adapters.Outbound{ChatID: dmChan, Text: long}); err != nil {
		t.Errorf("2000 characters: %v", err)
	}

	if err := a.Typing(ctx, chanID); err != nil {
		t.Fatal(err)
	}
	if got := srv.Typing(); len(got) != 1 || got[0] != chanID {
		t.Errorf("typing in %v, want [%s]", got, chanID)
	}

	if err := a.Edit(ctx, chanID, sent.MessageID, "hello, edited"); err != nil {
		t.Fatal(err)
	}
	if e := srv.Edits(); len(e) != 1 || e[0] != (discordtest.Edit{ChannelID: chanID, MessageID: sent.MessageID, Content: "hello, edited"}) {
		t.Errorf("edits = %+v", e)
	}
	err = a.Edit(ctx, chanID, "1234", "gone")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != 10008 {
		t.Errorf("editing an unknown message: %v, want APIError 404 code 10008", err)
	}
}

func TestSendRefused(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	ctx := waitCtx(t)
	tests := []struct {
		name string
		out  adapters.Outbound
		want string
	}{
		{"too long", adapters.Outbound{ChatID: chanID, Text: strings.Repeat("a", 2001)}, "2001 characters"},
		{"empty", adapters.Outbound{ChatID: chanID, Text: "  "}, "empty message"},
		{"chat id not an id", adapters.Outbound{ChatID: "../../users/@me", Text: "x"}, "not a Discord id"},
		{"reply_to not an id", adapters.Outbound{ChatID: chanID, Text: "x", ReplyTo: "abc"}, "not a Discord id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Send(ctx, tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Send = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests made for refused messages, want none", n)
	}
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	ctx := waitCtx(t)

	srv.RateLimitNext(1, 1500*time.Millisecond)
	_, err := a.Send(ctx, adapters.Outbound{ChatID: chanID, Text: "hi"})
	var rl *adapters.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("Send = %v, want RateLimitError after 1.5s", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: a 429 goes back to the outbox, not retried inside", n)
	}
	if len(srv.Sent()) != 0 {
		t.Errorf("sent %d", len(srv.Sent()))
	}

	sent, err := a.Send(ctx, adapters.Outbound{ChatID: dmChan, Text: "to post"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RateLimitNext(1, 250*time.Millisecond)
	if err := a.Edit(ctx, dmChan, sent.MessageID, "edited"); !errors.As(err, &rl) || rl.RetryAfter != 250*time.Millisecond {
		t.Errorf("Edit = %v, want RateLimitError after 250ms", err)
	}
	srv.RateLimitNext(1, 250*time.Millisecond)
	if err := a.Typing(ctx, threadID); !errors.As(err, &rl) {
		t.Errorf("Typing = %v, want RateLimitError", err)
	}
}

// TestRateLimitWithoutBody: a 429 from a proxy or Cloudflare may carry only
// Retry-After; it is a rate limit all the same.
func TestRateLimitWithoutBody(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "3")
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "<html><body>Error 1015: You are being rate limited</body></html>")
	}))
	defer proxy.Close()
	ad, err := New("dc-test", yamlDecoder("token: abc.def.ghi\napi_url: "+proxy.URL+"\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ad.Send(context.Background(), adapters.Outbound{ChatID: chanID, Text: "hi"})
	var rl *adapters.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Errorf("Send = %v, want RateLimitError after 3s", err)
	}
	if hits.Load() != 1 {
		t.Errorf("%d requests, want 1", hits.Load())
	}
}

// TestTokenNeverShown: neither logs nor errors nor printed config carry the
// token, through a session's whole life and its failures.
func TestTokenNeverShown(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	log, logs := newLog()
	a := newAdapter(t, srv, "", log)
	s := newSink()
	s.failN = 1
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "hi"})
	s.next(t)
	srv.Drop()
	if _, err := srv.WaitResumes(ctx, 1); err != nil {
		t.Fatal(err)
	}

	var errs []error
	srv.FailNext(1, http.StatusUnauthorized)
	_, err := a.Send(ctx, adapters.Outbound{ChatID: chanID, Text: "x"})
	errs = append(errs, err)
	srv.FailNext(1, http.StatusForbidden)
	errs = append(errs, a.Typing(ctx, chanID))
	srv.RateLimitNext(1, 10*time.Millisecond)
	_, err = a.Send(ctx, adapters.Outbound{ChatID: dmChan, Text: "x"})
	errs = append(errs, err)
	_, err = New("dc-x", yamlDecoder("token: \"has a space\"\n"), adapters.Deps{})
	errs = append(errs, err)

	var shown []string
	for i, err := range errs {
		if err == nil {
			t.Errorf("error %d: got none", i)
			continue
		}
		shown = append(shown, err.Error(), fmt.Sprintf("%+v %#v", err, err))
	}
	var apiErr *APIError
	if !errors.As(errs[0], &apiErr) || apiErr.Status != 401 || !strings.Contains(apiErr.Error(), "token") {
		t.Errorf("401: %v, want an APIError that says to check the token", errs[0])
	}
	shown = append(shown, logs.String(), fmt.Sprintf("%v %+v %#v", a.set, a.set, a.set), fmt.Sprintf("%+v", a))
	for _, s := range shown {
		if strings.Contains(s, srv.Token()) || strings.Contains(s, "has a space") {
			t.Errorf("the token is shown: %s", s)
		}
	}
}

func TestFetch(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	ctx := waitCtx(t)
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	att := srv.AddAttachment(dmChan, "cat.png", "image/png", png)
	ref := adapters.FileRef{ID: att.ID, Name: att.Filename, MediaType: att.ContentType, Size: int64(att.Size), URL: att.URL}

	data, mt, err := a.Fetch(ctx, ref, 1<<20)
	if err != nil || mt != "image/png" || string(data) != string(png) {
		t.Fatalf("Fetch = %d bytes, %q, %v", len(data), mt, err)
	}
	untyped := ref
	untyped.MediaType = ""
	if _, mt, err := a.Fetch(ctx, untyped, 0); err != nil || mt != "image/png" {
		t.Errorf("without a media type: %q, %v; want it from the response", mt, err)
	}
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.Path, "/attachments/") && r.Authorized {
			t.Errorf("the bot token went to the CDN")
		}
	}

	before := len(srv.Requests())
	if _, _, err := a.Fetch(ctx, ref, 50); !errors.Is(err, adapters.ErrTooLarge) {
		t.Errorf("declared size over the limit: %v, want ErrTooLarge", err)
	}
	if len(srv.Requests()) != before {
		t.Errorf("a file declared too large was requested")
	}
	unsized := ref
	unsized.Size = 0
	if _, _, err := a.Fetch(ctx, unsized, 50); !errors.Is(err, adapters.ErrTooLarge) {
		t.Errorf("actual size over the limit: %v, want ErrTooLarge", err)
	}

	elsewhere := ref
	elsewhere.URL = "http://169.254.169.254/latest/meta-data"
	if _, _, err := a.Fetch(ctx, elsewhere, 0); err == nil || !strings.Contains(err.Error(), "not Discord's CDN") {
		t.Errorf("a link off Discord's CDN: %v, want it refused", err)
	}
	gone := ref
	gone.URL = srv.URL() + "/attachments/" + dmChan + "/1/gone.png"
	if _, _, err := a.Fetch(ctx, gone, 0); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a deleted file: %v", err)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	if ok, detail := a.Health(); ok || detail != "not started" {
		t.Errorf("before Start: %v %q", ok, detail)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx, newSink()) }()
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ok, detail := a.Health(); ok || detail != "stopped" {
		t.Errorf("after Start: %v %q", ok, detail)
	}

	bad, err := New("dc-bad", yamlDecoder("token: wrong\napi_url: "+srv.URL()+"\n"), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Start(context.Background(), newSink()); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Start = %v", err)
	}
	if ok, detail := bad.(*Adapter).Health(); ok || !strings.HasPrefix(detail, "refused: ") || strings.Contains(detail, "wrong") {
		t.Errorf("refused: %v %q", ok, detail)
	}
}
