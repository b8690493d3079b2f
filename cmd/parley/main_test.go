package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/migrations"
	"github.com/parleyd/parley/sessions"
)

// parley runs one command line in process and returns its exit code and output.
func parley(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// writeConfig writes a config using a fresh SQLite file and returns its path.
func writeConfig(t *testing.T, extra string) (string, string) {
	t.Helper()
	return writeConfigTB(t, extra)
}

func writeConfigTB(t testing.TB, extra string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data", "parley.db")
	path := filepath.Join(dir, "parley.yaml")
	body := fmt.Sprintf("database:\n  url: %s\n%s", dbPath, extra)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dbPath
}

func TestUsageAndVersion(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args     []string
		code     int
		contains string
	}{
		{nil, 2, "Usage:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"version"}, 0, "parley "},
		{[]string{"help"}, 0, "parley run"},
		{[]string{"sessions"}, 2, "parley sessions needs a subcommand"},
		{[]string{"sessions", "ls", "--limit", "0"}, 2, "--limit 0 is out of range"},
		{[]string{"sessions", "ls", "--limit", "201"}, 2, "use 1 to 200"},
		{[]string{"sessions", "ls", "--status", "gone"}, 2, "use active or archived"},
		{[]string{"sessions", "show"}, 2, "takes 1 argument"},
		{[]string{"sessions", "ls", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"config"}, 2, "parley config needs a subcommand"},
		{[]string{"config", "check", "--help"}, 0, "Usage:\n  parley config check [--config FILE]"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := parley(t, ctx, tc.args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.contains) {
				t.Fatalf("exit %d, output %q%q; want exit %d containing %q", code, out, errOut, tc.code, tc.contains)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	ctx := context.Background()
	good, _ := writeConfig(t, "agents:\n  - id: family\n    timezone: Europe/Berlin\n")
	code, out, _ := parley(t, ctx, "config", "check", "--config", good)
	if code != 0 || !strings.HasPrefix(out, "ok") {
		t.Fatalf("good config: exit %d, %q", code, out)
	}
	bad, _ := writeConfig(t, "agents:\n  - id: family\n    timezone: Mars/Olympus\n    colour: blue\n")
	code, out, errOut := parley(t, ctx, "config", "check", "--config", bad)
	if code != 1 || !strings.Contains(out, "Mars/Olympus") || !strings.Contains(out, `unknown key "agents[0].colour"`) {
		t.Fatalf("bad config: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = parley(t, ctx, "config", "check", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("missing config: exit %d, %q", code, errOut)
	}
	// A broken config stops every command that uses the broken part, with
	// the reasons; migrate uses only the database.
	code, _, errOut = parley(t, ctx, "run", "--config", bad)
	if code != 1 || !strings.Contains(errOut, "Mars/Olympus") {
		t.Fatalf("run with a bad config: exit %d, %q", code, errOut)
	}
	badDB, _ := writeConfig(t, "  sqlite:\n    synchronous: sometimes\n")
	code, _, errOut = parley(t, ctx, "migrate", "--config", badDB)
	if code != 1 || !strings.Contains(errOut, `database.sqlite.synchronous: "sometimes" is not allowed`) {
		t.Fatalf("migrate with a bad database setting: exit %d, %q", code, errOut)
	}
	if code, out, errOut := parley(t, ctx, "migrate", "--config", bad); code != 0 {
		t.Fatalf("migrate with a bad agent: exit %d, %q %q; it uses only the database", code, out, errOut)
	}
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	path, _ := writeConfig(t, "")
	latest, err := migrations.Latest(dbutil.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	count, err := migrations.Count(dbutil.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := parley(t, ctx, "migrate", "--config", path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("applied %d migration(s); schema is at version %d", count, latest)) {
		t.Fatalf("first migrate: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = parley(t, ctx, "migrate", "--config", path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("applied 0 migration(s); schema is at version %d", latest)) {
		t.Fatalf("second migrate: exit %d, %q", code, out)
	}
}

func TestMigratePostgresHidesPassword(t *testing.T) {
	dbtest.RequirePostgres(t)
	db := dbtest.RawPostgres(t) // a fresh schema, to learn its search_path
	var schema string
	if err := db.Reader().QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	u := strings.Replace(os.Getenv(dbtest.EnvPostgres), "postgres@", "postgres:s3cret-pw@", 1)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte("database:\n  url: "+u+sep+"search_path="+schema+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := parley(t, context.Background(), "migrate", "--config", path)
	count, err := migrations.Count(dbutil.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(out, "postgres database") || !strings.Contains(out, fmt.Sprintf("applied %d", count)) {
		t.Fatalf("migrate: exit %d, %q %q", code, out, errOut)
	}
	if strings.Contains(out+errOut, "s3cret-pw") {
		t.Fatalf("password printed: %q %q", out, errOut)
	}
}

func TestSessionsListAndShow(t *testing.T) {
	ctx := context.Background()
	path, dbPath := writeConfig(t, "")
	db, err := dbutil.Open(ctx, dbutil.Options{URL: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if code, _, errOut := parley(t, ctx, "migrate", "--config", path); code != 0 {
		t.Fatal(errOut)
	}
	store := sessions.NewStore(db)
	tg, _, err := store.Resolve(ctx, sessions.ChatKey("telegram", "4242", "4242", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []sessions.Message{
		{Role: sessions.RoleUser, Content: "what's for dinner?"},
		{Role: sessions.RoleAssistant, Content: "pasta", Model: "echo", Usage: &sessions.Usage{Input: 10, Output: 2}},
	} {
		if _, err := store.Append(ctx, tg.ID, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Reset(ctx, sessions.GroupKey("discord", "77", "default")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Writer().Exec(`INSERT INTO message_archive (id, session_id, seq, role, content, created_at, archived_at, compaction_id)
		VALUES ('0190c7a0-0000-7000-8000-00000000000a', $1, 0, 'user', 'long ago', 1, 2, 'c1')`, tg.ID); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := parley(t, ctx, "sessions", "ls", "--config", path)
	if code != 0 || !strings.Contains(out, "telegram:4242") || !strings.Contains(out, "discord:77") {
		t.Fatalf("ls: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = parley(t, ctx, "sessions", "ls", "--surface", "telegram", "--json", "--config", path)
	var page sessions.Page
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != tg.ID {
		t.Fatalf("ls --json: exit %d, %q", code, out)
	}
	code, out, _ = parley(t, ctx, "sessions", "ls", "--limit", "1", "--config", path)
	if code != 0 || !strings.Contains(out, "more: parley sessions ls --limit 1 --cursor ") {
		t.Fatalf("ls --limit 1 does not offer the next page: %q", out)
	}
	code, out, _ = parley(t, ctx, "sessions", "ls", "--cursor", "nonsense", "--config", path)
	if code != 1 {
		t.Fatalf("ls with a bad cursor: exit %d %q", code, out)
	}

	// Flags after the positional argument work too.
	code, out, errOut = parley(t, ctx, "sessions", "show", string(tg.ID), "--config", path)
	if code != 0 || !strings.Contains(out, "what's for dinner?") || !strings.Contains(out, "pasta") || strings.Contains(out, "long ago") {
		t.Fatalf("show: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = parley(t, ctx, "sessions", "show", string(tg.ID), "--archived", "--config", path)
	if code != 0 || !strings.Contains(out, "long ago") || !strings.Contains(out, "[archived]") {
		t.Fatalf("show --archived: exit %d, %q", code, out)
	}
	code, out, _ = parley(t, ctx, "sessions", "show", "--json", string(tg.ID), "--config", path)
	var shown struct {
		Session  sessions.Session
		Messages []sessions.Message
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Messages) != 2 {
		t.Fatalf("show --json: exit %d, %q", code, out)
	}
	code, _, errOut = parley(t, ctx, "sessions", "show", "0190c7a0-0000-7000-8000-0000000000ff", "--config", path)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("show unknown: exit %d, %q", code, errOut)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestRunServesHealthAndStopsOnSignal(t *testing.T) {
	// The signal package's one receiving goroutine starts with the first
	// signal.Notify (run's, for SIGHUP) and lasts as long as the process:
	// start it before counting.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	signal.Stop(sig)
	baseline := runtime.NumGoroutine()
	addr := freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() { done <- run(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, &syncWriter{w: &errOut}) }()

	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	var ready bool
	for time.Now().Before(deadline) && !ready {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			var body map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			ready = resp.StatusCode == 200 && body["status"] == "ready"
		}
		if !ready {
			select {
			case code := <-done:
				t.Fatalf("run exited early with %d", code)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if !ready {
		t.Fatal("/readyz never answered 200")
	}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	cancel() // what SIGINT/SIGTERM do
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run exited %d: %s", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop after the signal")
	}
	if _, err := client.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
	// Nothing is left running: the count returns to what it was (the HTTP
	// client's idle connections close first).
	client.CloseIdleConnections()
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left after shutdown (started with %d):\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunReportsBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path, _ := writeConfig(t, "http:\n  listen: "+ln.Addr().String()+"\n")
	code, _, errOut := parley(t, context.Background(), "run", "--config", path)
	if code != 1 || !strings.Contains(errOut, "set http.listen") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	ctx := context.Background()
	path, dbPath := writeConfig(t, "")
	code, _, errOut := parley(t, ctx, "sessions", "ls", "--config", path)
	if code != 1 || !strings.Contains(errOut, "no database at") || !strings.Contains(errOut, "parley migrate") {
		t.Fatalf("ls without a database: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(dbPath); !os.IsNotExist(err) {
		t.Fatalf("ls created the database: %v", err)
	}
	// A database an older parley left behind is reported, not migrated.
	db, err := dbutil.Open(ctx, dbutil.Options{URL: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := migrations.Provider(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = parley(t, ctx, "sessions", "ls", "--config", path)
	if code != 1 || !strings.Contains(errOut, "schema is at version 1") {
		t.Fatalf("ls on an old schema: exit %d, %q", code, errOut)
	}
	if v, _ := migrations.Version(ctx, db); v != 1 {
		t.Fatalf("ls migrated the database to %d", v)
	}
}

// With http.ops_listen, health and metrics move to their own address.
func TestOpsListen(t *testing.T) {
	addr, ops := freeAddr(t), freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\n  ops_listen: "+ops+"\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, &syncWriter{w: &bytes.Buffer{}})
	}()
	defer func() { cancel(); <-done }()
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(url string) int {
		resp, err := client.Get(url)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for get("http://"+ops+"/readyz") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never answered on ops_listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := get("http://" + ops + "/metrics"); got != 200 {
		t.Fatalf("/metrics on ops_listen: %d", got)
	}
	if got := get("http://" + addr + "/healthz"); got != 404 {
		t.Fatalf("/healthz on listen: %d, want 404", got)
	}
	if got := get("http://" + addr + "/v1/sessions"); got != 401 {
		t.Fatalf("the API on listen: %d, want 401 without a token", got)
	}
}
