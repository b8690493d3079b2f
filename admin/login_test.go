package admin

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/internal/syncbuf"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef"

func newTestServer(t *testing.T, open dbtest.Opener, now func() time.Time) *httptest.Server {
	t.Helper()
	h, err := Handler(Options{Tokens: []string{testToken}, DB: open(t), Now: now,
		Overview: nil})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// client is a browser-like client: it keeps cookies and doesn't follow
// redirects, so each answer can be read.
func client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func postLogin(t *testing.T, c *http.Client, srv *httptest.Server, token, next string) *http.Response {
	t.Helper()
	resp, err := c.PostForm(srv.URL+"/admin/login", url.Values{"token": {token}, "next": {next}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func status(t *testing.T, c *http.Client, srv *httptest.Server, path string) int {
	t.Helper()
	resp, err := c.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A login is a server-side session: the cookie holds no form of the token,
// logging out ends it (a copy of the cookie no longer works), and it ends
// by itself after its life.
func TestAdminLoginIsAServerSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		now := time.Now()
		srv := newTestServer(t, open, func() time.Time { return now })
		c := client(t)
		resp := postLogin(t, c, srv, testToken, "/admin/cron")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/cron" {
			t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		u, _ := url.Parse(srv.URL + "/admin")
		cookies := c.Jar.Cookies(u)
		if len(cookies) != 1 || strings.Contains(cookies[0].Value, testToken) {
			t.Fatalf("login cookie %v", cookies)
		}
		stolen := *cookies[0]
		if code := status(t, c, srv, "/admin/hooks"); code != http.StatusOK {
			t.Fatalf("a page with the login: %d", code)
		}
		resp, err := c.PostForm(srv.URL+"/admin/logout", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		thief := client(t)
		thief.Jar.SetCookies(u, []*http.Cookie{&stolen})
		if code := status(t, thief, srv, "/admin/hooks"); code != http.StatusUnauthorized {
			t.Fatalf("a copy of the cookie after logout: %d, want 401", code)
		}

		// A login ends after its life.
		c = client(t)
		postLogin(t, c, srv, testToken, "")
		if code := status(t, c, srv, "/admin/hooks"); code != http.StatusOK {
			t.Fatalf("a page with a fresh login: %d", code)
		}
		now = now.Add(loginLife + time.Second)
		if code := status(t, c, srv, "/admin/hooks"); code != http.StatusUnauthorized {
			t.Fatalf("a page with a login past its life: %d, want 401", code)
		}
	})
}

// Guessing the token is slowed per address; the next address is not.
// A blocked address's attempts are not logged one by one: a flood of them
// does not flood the log.
func TestAdminLoginThrottlesGuesses(t *testing.T) {
	var logged syncbuf.Buffer
	h, err := Handler(Options{Tokens: []string{testToken}, DB: dbtest.SQLite(t), Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := client(t)
	for i := range loginGuesses {
		if resp := postLogin(t, c, srv, "wrong", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i+1, resp.StatusCode)
		}
	}
	if resp := postLogin(t, c, srv, testToken, ""); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right token after %d wrong ones: %d, want 429 with Retry-After", loginGuesses, resp.StatusCode)
	}
	for range 20 {
		if resp := postLogin(t, c, srv, "wrong", ""); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a guess from a blocked address: %d, want 429", resp.StatusCode)
		}
	}
	if n, want := strings.Count(logged.String(), "dashboard login"), loginGuesses+1; n != want {
		t.Fatalf("%d login lines logged, want %d (each wrong token, and the block once):\n%s", n, want, logged.String())
	}
}

// After a login, only a dashboard path is followed; a path a browser could
// read as another site goes to the overview. A flash in the query is not
// shown.
func TestAdminLoginNextAndFlash(t *testing.T) {
	for _, tc := range []struct{ next, want string }{
		{"/admin/cron", "/admin/cron"},
		{"/admin", "/admin"},
		{`/\evil.example`, "/admin"},
		{`/admin/\evil`, "/admin"},
		{"//evil.example/admin", "/admin"},
		{"/admin//evil.example", "/admin"},
		{"https://evil.example/admin", "/admin"},
		{"/administrator", "/admin"},
		{"/admin/login", "/admin"},
	} {
		if got := safeNext(tc.next); got != tc.want {
			t.Errorf("next %q goes to %q, want %q", tc.next, got, tc.want)
		}
	}
	srv := newTestServer(t, dbtest.SQLite, nil)
	resp, err := http.Get(srv.URL + "/admin/hooks?flash=Your+session+expired%2C+call+%2B1-555")
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = io.Copy(body, resp.Body)
	resp.Body.Close()
	if strings.Contains(body.String(), "call +1-555") {
		t.Fatalf("the login page shows a flash from the query:\n%s", body)
	}
}

// A form posted from another site is refused, and the refusal says what
// to do; the dashboard's own forms pass, behind a proxy that changes the
// Host header too.
func TestCrossSiteFormsAreRefused(t *testing.T) {
	srv := newTestServer(t, dbtest.SQLite, nil)
	for _, tc := range []struct {
		name        string
		origin, sfs string
		want        int
	}{
		{"another site, said by the browser", "https://evil.example", "cross-site", http.StatusForbidden},
		{"another site, by its origin only", "https://evil.example", "", http.StatusForbidden},
		{"this site", srv.URL, "same-origin", http.StatusSeeOther},
		{"this site behind a proxy that changes Host", "https://parley.example", "same-origin", http.StatusSeeOther},
		{"a client that sends neither", "", "", http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/admin/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.sfs != "" {
				req.Header.Set("Sec-Fetch-Site", tc.sfs)
			}
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == http.StatusForbidden && !strings.Contains(string(body), "reverse proxy") {
				t.Fatalf("the refusal does not say what to do: %s", body)
			}
		})
	}
}
