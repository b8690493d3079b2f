package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
)

// Every server parley runs bounds a slow client's headers, its whole
// request and an idle connection.
func TestHTTPServersHaveTimeouts(t *testing.T) {
	srv := httpserve.NewServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("read header %s, read %s, idle %s: each must be set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
	if srv.ReadTimeout < srv.ReadHeaderTimeout {
		t.Fatalf("read timeout %s is shorter than the header timeout %s", srv.ReadTimeout, srv.ReadHeaderTimeout)
	}
}

// The API's routes are registered on its first request, not at start, with
// the start's tokens; its limits are the running config's, so a reload
// before that request changes them.
func TestServedAPIBuiltOnFirstRequestFollowsReloadedLimits(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfigTB(t, "http:\n  listen: 127.0.0.1:0\n  tokens: [\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"]\n  max_title_chars: 10\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	next, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	next.HTTP.MaxTitleChars = 1000
	if err := d.Reload(ctx, next, nil); err != nil {
		t.Fatal(err)
	}
	post := func(token, title string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "POST", "http://"+d.listen+"/v1/sessions", strings.NewReader(`{"title":"`+title+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("wrong", "short"); got != http.StatusUnauthorized {
		t.Fatalf("a wrong token: status %d, want 401", got)
	}
	if got := post("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "a title of 25 characters"); got != http.StatusCreated {
		t.Fatalf("a title over the start's max_title_chars but within the reloaded one: status %d, want 201", got)
	}
	if got := post("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "short"); got != http.StatusCreated && got != http.StatusOK {
		t.Fatalf("a session with a short title: status %d", got)
	}
}
