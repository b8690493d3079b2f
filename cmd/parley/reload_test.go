package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/daemon"
)

// SIGHUP, through parley reload, changes hooks and cron jobs live, refuses
// a config that changes a key only a restart changes (naming it, exit 1),
// and keeps the running config when the new one has problems.
func TestReloadChangesTheConfigLive(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data", "parley.db")
	addr := freeAddr(t)
	hook := func(id string) string {
		return "  - id: " + id + "\n    auth: token\n    secret: \"" + hookSecret + "\"\n    prompt: \"{{.q}}\"\n"
	}
	job := func(id string) string {
		return "    - id: " + id + "\n      schedule: \"0 3 * * *\"\n      prompt: report\n"
	}
	write := func(listen, hooks, jobs string) string {
		path := filepath.Join(dir, "parley.yaml")
		body := "database:\n  url: " + dbPath + "\nhttp:\n  listen: " + listen + "\n  tokens: [\"" + apiToken + "\"]\nhooks:\n" + hooks + "cron:\n  jobs:\n" + jobs
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := write(addr, hook("a"), job("j1"))
	p := &parleyProcess{tb: t, cmd: parleyCommand("run", "--config", path), output: newTailBuffer(), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	defer p.stop(15 * time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(p.output.String(), "parley started") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("parley didn't start:\n%s", p.output.String())
		}
	}
	post := func(id string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/hooks/"+id, strings.NewReader(`{"q":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+hookSecret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := post("a"), post("b"); a != http.StatusAccepted || b != http.StatusNotFound {
		t.Fatalf("before the reload: hook a %d, hook b %d", a, b)
	}

	// The listen address changes only at a restart: a reload that changes
	// it with the hooks and jobs is refused whole, naming it.
	write("127.0.0.1:1", hook("b"), job("j1")+job("j2"))
	code, out, errOut := parley(t, context.Background(), "reload", "--config", path)
	if code != 1 || !strings.Contains(errOut, "http.listen") || !strings.Contains(errOut, "restart") {
		t.Fatalf("reload changing http.listen: exit %d %q %q, want 1 naming http.listen", code, out, errOut)
	}
	if a, b := post("a"), post("b"); a != http.StatusAccepted || b != http.StatusNotFound {
		t.Fatalf("after a refused reload: hook a %d, hook b %d", a, b)
	}

	// Hooks and jobs change live.
	write(addr, hook("b"), job("j1")+job("j2"))
	code, out, errOut = parley(t, context.Background(), "reload", "--config", path)
	if code != 0 || !strings.Contains(out, "reloaded its config") {
		t.Fatalf("reload: exit %d %q %q\n%s", code, out, errOut, p.output.String())
	}
	if a, b := post("a"), post("b"); a != http.StatusNotFound || b != http.StatusAccepted {
		t.Fatalf("after the reload: hook a %d, hook b %d", a, b)
	}
	code, out, _ = parley(t, context.Background(), "status", "--config", path, "--json")
	var st daemon.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.CronJobs) != 2 || st.Listen != addr {
		t.Fatalf("status after the reload: %d %s", code, out)
	}

	// A config with problems changes nothing.
	write(addr, hook("c")+"  - id: c\n", job("j1"))
	code, _, errOut = parley(t, context.Background(), "reload", "--config", path)
	if code != 1 || !strings.Contains(errOut, "kept its running config") {
		t.Fatalf("reload of a bad config: exit %d %q", code, errOut)
	}
	if b, c := post("b"), post("c"); b != http.StatusAccepted || c != http.StatusNotFound {
		t.Fatalf("after a refused reload: hook b %d, hook c %d", b, c)
	}
}
