package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/httpserve"
)

// config check reports everything `parley run` refuses, every problem at
// once, with the right count: the config's own, each channel's, cron's and
// the agents' tool names.
func TestConfigCheckFindsWhatStartRefuses(t *testing.T) {
	path, _ := writeConfig(t, "adapters:\n  - id: tg\n    type: telegram\n    token: \"\"\n  - id: sms\n    type: carrier-pigeon\n"+
		"agents:\n  - id: default\n    tools: [memory_search, web_search, read_file, web_search, \"web search\"]\n    timezone: Mars/Olympus\n"+
		"bindings:\n  - agent: nobody\n    adapter: tg\n"+
		"cron:\n  jobs:\n    - id: r\n      schedule: \"every day\"\n      prompt: report\n      notify: [\"tg:1\", \"tg-main:1\"]\n"+
		"hooks:\n  - id: ci\n    auth: hmac\n    secret: ${CI_HOOK_SECRET_UNSET_IN_TEST}\n    prompt: hi\n    notify: [\"discord-main:5\"]\n")
	code, out, errOut := parley(t, context.Background(), "config", "check", "--config", path)
	want := []string{
		`:7: adapters[1]: unknown adapter type "carrier-pigeon"`,
		`:11: agents[0].tools[3]: "web_search" is listed as tools[1] too`,
		`:11: agents[0].tools[4]: "web search" is not a tool name`,
		`:11: agents[0].tools[1]: no tool is called "web_search"; the tools are file_delete, file_list, file_read, file_write, kv_delete, kv_get, kv_list, kv_set, memory_search, memory_write, schedule_create`,
		`:11: agents[0].tools[2]: no tool is called "read_file"`,
		`:12: agents[0].timezone: unknown time zone "Mars/Olympus"`,
		`:14: bindings[0].agent: "nobody" is not an agent`,
		`:19: cron.jobs[0].schedule: `,
		`:21: cron.jobs[0].notify[1]: "tg-main:1" names adapter "tg-main", which is not in adapters; use one of: tg, sms`,
		`:25: hooks[0].secret: environment variable CI_HOOK_SECRET_UNSET_IN_TEST is not set`,
		`:27: hooks[0].notify[0]: "discord-main:5" names adapter "discord-main"`,
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != len(want) || !strings.Contains(errOut, "11 problem(s)") {
		t.Fatalf("exit %d, %d lines, want %d and \"11 problem(s)\":\n%s\n%s", code, len(lines), len(want), out, errOut)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i+1, lines[i], w)
		}
	}

	// Each of them alone stops the start too.
	for _, extra := range []string{
		"agents:\n  - id: default\n    tools: [web_search]\n",
		"adapters:\n  - id: sms\n    type: carrier-pigeon\n",
		"adapters:\n  - id: tg\n    type: telegram\n    token: \"\"\ncron:\n  jobs:\n    - id: r\n      schedule: \"@daily\"\n      prompt: report\n      notify: [\"tg-main:1\"]\n",
	} {
		p, _ := writeConfig(t, "http:\n  listen: 127.0.0.1:0\n"+extra)
		code, out, errOut := parley(t, context.Background(), "config", "check", "--config", p)
		if code != 1 || !strings.Contains(errOut, ": 1 problem(s)") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("config check of %q: exit %d, %q %q; want one problem", extra, code, out, errOut)
		}
		if code, _, errOut := parleyBounded(t, "run", "--config", p); code != 1 || !strings.Contains(errOut, strings.TrimSpace(out)) {
			t.Errorf("run with %q: exit %d, %q; want it refused with %q", extra, code, errOut, out)
		}
	}
}

// The example passes config check as it ships, with no variable set.
func TestConfigCheckOfTheExample(t *testing.T) {
	for _, v := range []string{"PARLEY_DATABASE_URL", "PARLEY_LISTEN", "PARLEY_CALLBACK_SECRET", "PARLEY_MODEL", "PARLEY_FAMILY_MODEL",
		"TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "TYPESENSE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CI_HOOK_SECRET"} {
		t.Setenv(v, "") // restored after the test
		if err := os.Unsetenv(v); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := parley(t, context.Background(), "config", "check", "--config", "../../config.example.yaml")
	if code != 0 || out != "ok: ../../config.example.yaml\n" {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
}

// ${VAR} with VAR unset stops config check and the start, naming it, and
// never runs on the default database instead.
func TestUnsetVariableStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	path := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(path, []byte("database:\n  url: ${MY_DB_URL_UNSET_IN_TEST}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "database.url: environment variable MY_DB_URL_UNSET_IN_TEST is not set; export it, or write ${MY_DB_URL_UNSET_IN_TEST:-} where empty is fine"
	code, out, _ := parley(t, context.Background(), "config", "check", "--config", path)
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("config check: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"run"}, {"migrate"}, {"sessions", "ls"}} {
		code, _, errOut := parleyBounded(t, append(args, "--config", path)...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Fatalf("%s: exit %d, %q", args, code, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a database was made under data/ (%v)", err)
	}
}

// Tokens and signing secrets under 32 bytes, or the docs' placeholder,
// stop the start with how to make one, and are never printed.
func TestWeakSecretsStopTheStart(t *testing.T) {
	tests := []struct{ name, extra, secret string }{
		{"short API token", "http:\n  listen: 127.0.0.1:0\n  tokens: [\"short-token-0123456789\"]\n", "short-token-0123456789"},
		{"short callback secret", "http:\n  listen: 127.0.0.1:0\n  callback_secret: cb-0123456789abcdef\n", "cb-0123456789abcdef"},
		{"the docs' hook secret", "http:\n  listen: 127.0.0.1:0\nhooks:\n  - id: ci\n    auth: hmac\n    secret: ${CI_HOOK_SECRET_UNSET_IN_TEST:-change-me-to-a-long-secret}\n    prompt: hi\n",
			"change-me-to-a-long-secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := writeConfig(t, tc.extra)
			code, _, errOut := parleyBounded(t, "run", "--config", path)
			if code != 1 || !strings.Contains(errOut, `make one with "openssl rand -hex 32"`) {
				t.Fatalf("exit %d, %q", code, errOut)
			}
			if strings.Contains(errOut, tc.secret) {
				t.Errorf("the secret is printed: %q", errOut)
			}
		})
	}
}

// The admin commands need the database, not the daemon's environment: the
// API token, callback and hook secrets unset in the operator's shell stop
// only the commands that use them.
func TestAdminCommandsNeedOnlyTheDatabase(t *testing.T) {
	ctx := context.Background()
	addr := freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\"${PARLEY_API_TOKEN_UNSET_IN_TEST}\"]\n  callback_secret: ${PARLEY_CALLBACK_UNSET_IN_TEST}\n"+
		"adapters:\n  - id: tg\n    type: telegram\n    token: ${TELEGRAM_TOKEN_UNSET_IN_TEST}\n"+
		"hooks:\n  - id: ci\n    auth: hmac\n    secret: ${CI_HOOK_SECRET_UNSET_IN_TEST}\n    prompt: hi\n    notify: [\"tg:42\"]\n")
	for _, args := range [][]string{
		{"migrate"},
		{"sessions", "ls"},
		{"pairing", "ls"},
		{"cron", "ls"},
		{"hooks", "ls"},
		{"hooks", "deliveries", "ci"},
	} {
		code, out, errOut := parley(t, ctx, append(args, "--config", path)...)
		if code != 0 {
			t.Fatalf("%s: exit %d, %q %q", args, code, out, errOut)
		}
		if args[0] == "hooks" && args[1] == "ls" && !strings.Contains(out, "http://"+addr+"/hooks/ci") {
			t.Errorf("hooks ls = %q, want the URL on %s", out, addr)
		}
	}
	code, _, errOut := parleyBounded(t, "run", "--config", path)
	if code != 1 {
		t.Fatalf("run without the variables: exit %d", code)
	}
	for _, v := range []string{"PARLEY_API_TOKEN_UNSET_IN_TEST", "PARLEY_CALLBACK_UNSET_IN_TEST", "TELEGRAM_TOKEN_UNSET_IN_TEST", "CI_HOOK_SECRET_UNSET_IN_TEST"} {
		if !strings.Contains(errOut, v) {
			t.Errorf("run's error does not name %s: %q", v, errOut)
		}
	}
}

func TestHookBaseURL(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		":8080":          "http://localhost:8080",
		"0.0.0.0:9000":   "http://localhost:9000",
		"[::]:9000":      "http://localhost:9000",
		"[::1]:8080":     "http://[::1]:8080",
		"parley.lan:80":  "http://parley.lan:80",
	} {
		if got := httpserve.LocalURL(listen); got != want {
			t.Errorf("LocalURL(%q) = %q, want %q", listen, got, want)
		}
	}
}

// At debug level the daemon's HTTP server logs each request: method, path,
// status and duration, never the query or the headers.
func TestHTTPAccessLog(t *testing.T) {
	addr := freeAddr(t)
	path, _ := writeConfig(t, "http:\n  listen: "+addr+"\nlog:\n  level: debug\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errOut bytes.Buffer
	w := &syncWriter{w: &errOut}
	go func() { done <- run(ctx, []string{"run", "--config", path}, &bytes.Buffer{}, w) }()

	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://"+addr+"/healthz?token=query-secret-123", nil)
		req.Header.Set("Authorization", "Bearer header-secret-456")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never served: %v", err)
		}
		select {
		case code := <-done:
			t.Fatalf("run exited early with %d", code)
		case <-time.After(20 * time.Millisecond):
		}
	}
	resp, err := client.Post("http://"+addr+"/nowhere", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if code := <-done; code != 0 {
		w.mu.Lock()
		defer w.mu.Unlock()
		t.Fatalf("run exited %d: %s", code, errOut.String())
	}
	w.mu.Lock()
	logged := errOut.String()
	w.mu.Unlock()
	for _, want := range []string{
		`level=DEBUG msg="http request" component=http method=GET path=/healthz status=200 duration=`,
		`level=DEBUG msg="http request" component=http method=POST path=/nowhere status=404 duration=`,
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("log has no %q:\n%s", want, logged)
		}
	}
	for _, secret := range []string{"query-secret-123", "header-secret-456", "Bearer"} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log shows %q:\n%s", secret, logged)
		}
	}
}

// parleyBounded runs a command that should fail at once, such as a start
// that must be refused; one that runs instead stops after a while, and its
// exit code tells.
func parleyBounded(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return parley(t, ctx, args...)
}
