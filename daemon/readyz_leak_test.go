package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/httpserve"
)

// tcpProxy forwards a local port to addr until closed, then refuses.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTCPProxy(t *testing.T, addr string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// With PostgreSQL down, /readyz (no token) says the database is unreachable
// and nothing of its user, name or host; the error goes to the log, once
// for many probes, and to a request with an admin token.
func TestReadyzHidesWhereTheDatabaseIs(t *testing.T) {
	dbtest.RequirePostgres(t)
	schemaDB := dbtest.RawPostgres(t)
	var schema string
	if err := schemaDB.Reader().QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	base := os.Getenv(dbtest.EnvPostgres)
	host := strings.SplitN(strings.SplitN(base, "@", 2)[1], "/", 2)[0]
	proxy := newTCPProxy(t, host)
	url := strings.Replace(base, host, proxy.ln.Addr().String(), 1) + "&search_path=" + schema
	db, err := dbutil.Open(context.Background(), dbutil.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	proxy.close()

	var logged bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logged.Write(p)
	}), nil))
	h := httpserve.Handler(db, nil, nil, httpserve.ReadyOptions{Log: log, Tokens: []string{apiToken}})
	probe := func(token string) (int, string) {
		rr := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/readyz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rr, req)
		return rr.Code, rr.Body.String()
	}
	for range 3 {
		code, body := probe("")
		var got map[string]any
		_ = json.Unmarshal([]byte(body), &got)
		if code != http.StatusServiceUnavailable || got["database"] != "unreachable" {
			t.Fatalf("%d %s", code, body)
		}
		for _, leak := range []string{"user", "postgres", "127.0.0.1", proxy.ln.Addr().String(), "database=", schema} {
			if strings.Contains(strings.ReplaceAll(body, `"database":"unreachable"`, ""), leak) {
				t.Fatalf("/readyz without a token shows %q: %s", leak, body)
			}
		}
	}
	if code, body := probe(apiToken); code != http.StatusServiceUnavailable || !strings.Contains(body, "detail") {
		t.Fatalf("with the admin token: %d %s", code, body)
	}
	if code, body := probe("wrong-token-0123456789"); strings.Contains(body, "detail") {
		t.Fatalf("with a wrong token: %d %s", code, body)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logged.String(), "not ready"); n != 1 || !strings.Contains(logged.String(), "check=database") {
		t.Fatalf("%d log lines for four probes:\n%s", n, logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A full disk under the SQLite database makes the daemon not ready; room
// again makes it ready. The daemon checks its database's directory
// against database.sqlite.min_free_mb.
func TestReadyzDiskFull(t *testing.T) {
	db := dbtest.SQLite(t)
	var mu sync.Mutex
	free := uint64(10 << 20)
	checked := ""
	o := httpserve.ReadyOptions{DataDir: "/data/dir", MinFree: 100 << 20, DiskFree: func(dir string) (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		checked = dir
		return free, nil
	}}
	h := httpserve.Handler(db, nil, nil, o)
	probe := func() (int, map[string]any) {
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("GET", "/readyz", nil))
		var got map[string]any
		_ = json.Unmarshal(rr.Body.Bytes(), &got)
		return rr.Code, got
	}
	if code, got := probe(); code != http.StatusServiceUnavailable || got["disk"] != "full" || got["status"] != "unavailable" || got["disk_free_bytes"] != nil {
		t.Fatalf("a full disk: %d %v", code, got)
	}
	if checked != "/data/dir" {
		t.Fatalf("checked %q", checked)
	}
	mu.Lock()
	free = 1 << 30
	mu.Unlock()
	if code, got := probe(); code != http.StatusOK || got["disk"] != "ok" || got["status"] != "ready" {
		t.Fatalf("room again: %d %v", code, got)
	}

	path := filepath.Join(t.TempDir(), "parley.yaml")
	dbPath := filepath.Join(filepath.Dir(path), "data", "parley.db")
	if err := os.WriteFile(path, []byte("database:\n  url: "+dbPath+"\n  sqlite:\n    min_free_mb: 250\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rd := &Daemon{}
	rd.conf.Store(cfg)
	ro := rd.readyOptions()
	if err := os.MkdirAll(ro.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if ro.DataDir != filepath.Dir(dbPath) || ro.MinFree != 250<<20 || ro.DiskFree == nil {
		t.Fatalf("the daemon's readiness checks %q for %d bytes", ro.DataDir, ro.MinFree)
	}
	if n, err := ro.DiskFree(ro.DataDir); err != nil || n == 0 {
		t.Fatalf("free space of %s: %d %v", ro.DataDir, n, err)
	}
}

// After a failed fsync of the SQLite log every write fails until parley
// restarts (dbutil's ackLoop): /readyz says so, so an orchestrator restarts
// the daemon, and says what to do, with the error itself only for an admin.
func TestReadyzReportsALogThatCouldNotBeSynced(t *testing.T) {
	db := dbtest.SQLite(t)
	var mu sync.Mutex
	var broken error
	o := httpserve.ReadyOptions{Tokens: []string{"admin-token"}, Broken: func() error {
		mu.Lock()
		defer mu.Unlock()
		return broken
	}}
	h := httpserve.Handler(db, nil, nil, o)
	probe := func(token string) (int, map[string]any) {
		rr := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/readyz", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rr, req)
		var got map[string]any
		_ = json.Unmarshal(rr.Body.Bytes(), &got)
		return rr.Code, got
	}
	if code, got := probe(""); code != http.StatusOK || got["database"] != "ok" {
		t.Fatalf("before: %d %v", code, got)
	}
	mu.Lock()
	broken = errors.New("commit transaction: an fsync of the SQLite log failed (fdatasync parley.db-wal: input/output error)")
	mu.Unlock()
	code, got := probe("")
	if code != http.StatusServiceUnavailable || got["status"] != "unavailable" ||
		!strings.Contains(fmt.Sprint(got["database"]), "restart parley") || got["detail"] != nil {
		t.Fatalf("after a failed fsync, without a token: %d %v", code, got)
	}
	if code, got := probe("admin-token"); code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(got["detail"]), "input/output error") {
		t.Fatalf("after a failed fsync, as an admin: %d %v", code, got)
	}
}
