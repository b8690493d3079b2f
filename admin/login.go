package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/internal/throttle"
)

const (
	insertLoginQuery  = `INSERT INTO admin_sessions (id_sum, token_sum, expires_at, created_at) VALUES ($1, $2, $3, $4)`
	loginQuery        = `SELECT token_sum FROM admin_sessions WHERE id_sum = $1 AND expires_at > $2`
	deleteLoginQuery  = `DELETE FROM admin_sessions WHERE id_sum = $1`
	expireLoginsQuery = `DELETE FROM admin_sessions WHERE expires_at <= $1`
)

// loginLife is how long a dashboard login lasts.
const loginLife = 12 * time.Hour

// An address that fails loginGuesses logins within loginGuessWindow is
// refused for the rest of the window without a check.
const (
	loginGuesses     = 10
	loginGuessWindow = time.Minute
)

// flashCookie carries an action's outcome to the page it redirects to, so
// no link can put words on a dashboard page.
const flashCookie = "parley_flash"

// tokenSum is the SHA-256 of an admin token that matches one of the
// configured ones, in constant time, or false.
func (s *server) tokenSum(token string) ([sha256.Size]byte, bool) {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, t := range s.sums {
		match |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	return sum, match == 1
}

// loggedIn says whether the login cookie's id names a login that has not
// ended, made with a token still configured.
func (s *server) loggedIn(ctx context.Context, cookie string) bool {
	id, err := hex.DecodeString(cookie)
	if err != nil || len(id) != 32 || s.o.DB == nil {
		return false
	}
	idSum := sha256.Sum256(id)
	var tokenHex string
	err = s.o.DB.Read().QueryRowContext(ctx, loginQuery, hex.EncodeToString(idSum[:]), dbutil.Millis(s.now())).Scan(&tokenHex)
	if err != nil {
		return false
	}
	tok, err := hex.DecodeString(tokenHex)
	if err != nil || len(tok) != sha256.Size {
		return false
	}
	match := 0
	for _, t := range s.sums {
		match |= subtle.ConstantTimeCompare(tok, t[:])
	}
	return match == 1
}

func (s *server) now() time.Time {
	if s.o.Now != nil {
		return s.o.Now()
	}
	return time.Now()
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if refuseCrossSite(w, r) {
		return
	}
	addr := throttle.Addr(r)
	if blocked, wait := s.guesses.Blocked(addr); blocked { // logged when the block began
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		w.WriteHeader(http.StatusTooManyRequests)
		s.render(w, r, "login", map[string]any{"Error": "Too many wrong tokens from this address: wait a minute and try again."})
		return
	}
	sum, ok := s.tokenSum(r.PostFormValue("token"))
	if !ok {
		s.o.Log.WarnContext(r.Context(), "dashboard login refused: wrong token", "remote_addr", addr)
		if s.guesses.Fail(addr) {
			s.o.Log.WarnContext(r.Context(), "dashboard login: too many wrong tokens; refusing the address for a while", "remote_addr", addr)
		}
		w.WriteHeader(http.StatusUnauthorized)
		s.render(w, r, "login", map[string]any{"Error": "That token was refused: use one of http.tokens in parley's config.",
			"Next": safeNext(r.PostFormValue("next"))})
		return
	}
	s.guesses.Succeed(addr)
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	idSum := sha256.Sum256(id)
	now := s.now()
	ctx := r.Context()
	w8 := s.o.DB.Write()
	_, _ = w8.ExecContext(ctx, expireLoginsQuery, dbutil.Millis(now))
	if _, err := w8.ExecContext(ctx, insertLoginQuery, hex.EncodeToString(idSum[:]), hex.EncodeToString(sum[:]),
		dbutil.Millis(now.Add(loginLife)), dbutil.Millis(now)); err != nil {
		s.o.Log.ErrorContext(ctx, "dashboard login not stored", "error", err)
		http.Error(w, "the login could not be stored; try again, and see parley's log if it persists", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: hex.EncodeToString(id), Path: "/admin", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(loginLife.Seconds())})
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		if id, err := hex.DecodeString(c.Value); err == nil && s.o.DB != nil {
			idSum := sha256.Sum256(id)
			if _, err := s.o.DB.Write().ExecContext(r.Context(), deleteLoginQuery, hex.EncodeToString(idSum[:])); err != nil {
				s.o.Log.WarnContext(r.Context(), "dashboard logout not stored", "error", err)
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/admin", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}

// safeNext is where a login goes on to: next if it is a dashboard path,
// else the overview. Only a plain path under /admin is taken: no scheme,
// host, backslash or "//" that a browser could read as another site.
func safeNext(next string) string {
	if next != "/admin" && !strings.HasPrefix(next, "/admin/") {
		return "/admin"
	}
	if strings.ContainsAny(next, "\\\r\n\t") || strings.Contains(next, "//") || strings.HasPrefix(next, "/admin/login") {
		return "/admin"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return "/admin"
	}
	return next
}

// back redirects to the page an action came from, saying how it went.
func back(w http.ResponseWriter, r *http.Request, to, flash string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(flash), Path: "/admin", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeFlash reads and clears the outcome an action left for this page.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/admin", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	f, err := url.QueryUnescape(c.Value)
	if err != nil {
		return ""
	}
	return f
}
