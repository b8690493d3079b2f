package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/sessions"
)

// buildBinary compiles parley once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "parley")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func chatOnce(t *testing.T, bin, config, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "chat", "--config", config)
	cmd.Stdin = strings.NewReader(input)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("parley chat: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
	return out.String()
}

// The whole path as a user meets it: two separate `parley chat` processes
// talk to the agent in one session that survives the restart, and a second
// process can't open a database a running daemon holds.
func TestEndToEndChatAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	addr := freeAddr(t)
	config, _ := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\ngateway:\n  debounce: 0s\n")

	if out := chatOnce(t, bin, config, "remember the milk\n"); !strings.Contains(out, "remember the milk") {
		t.Fatalf("first chat printed %q", out)
	}
	if out := chatOnce(t, bin, config, "and the bread\n"); !strings.Contains(out, "and the bread") {
		t.Fatalf("second chat printed %q", out)
	}
	// /status answers at once, outside the queue: a third run sees both turns.
	if out := chatOnce(t, bin, config, "/status\n"); !strings.Contains(out, "cli:chat") || !strings.Contains(out, "4 messages") {
		t.Fatalf("the session did not continue across runs: %q", out)
	}

	code, lsOut, errOut := parley(t, context.Background(), "sessions", "ls", "--json", "--config", config)
	var page sessions.Page
	if code != 0 || json.Unmarshal([]byte(lsOut), &page) != nil || len(page.Sessions) != 1 || page.Sessions[0].Key.String() != "cli:chat" {
		t.Fatalf("sessions after two chats: %d %q %q", code, lsOut, errOut)
	}

	// A running daemon holds the database: chat says so instead of sharing it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	daemon := exec.CommandContext(ctx, bin, "run", "--config", config)
	var daemonErr bytes.Buffer
	daemon.Stderr = &daemonErr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = daemon.Process.Signal(os.Interrupt)
		_ = daemon.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon never became ready: %s", daemonErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Without an API token, chat refuses the database the daemon holds...
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	noToken := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(noToken, []byte(strings.Replace(string(raw), "  tokens: [\""+apiToken+"\"]\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "chat", "--config", noToken)
	cmd.Env = append(os.Environ(), "PARLEY_API_TOKEN=")
	cmd.Stdin = strings.NewReader("hi\n")
	combined, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(combined), "in use by another parley process") || !strings.Contains(string(combined), "pid") ||
		!strings.Contains(string(combined), "http.tokens") {
		t.Fatalf("chat beside a running daemon: %v %q", err, combined)
	}
	// ...and with one, it talks to the daemon through its API.
	cmd = exec.Command(bin, "chat", "--config", config)
	cmd.Stdin = strings.NewReader("hi over the api\n")
	attached, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(attached), "talking to it") || !strings.Contains(string(attached), "hi over the api") {
		t.Fatalf("chat attaching to the daemon: %v %q", err, attached)
	}
	// With an API token, chat talks to the running daemon through its API.
	// Its commands go to the API's routes: a command sent as a message
	// would be answered to a chat, which over the API is nowhere.
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	cmd = exec.CommandContext(cctx, bin, "chat", "--config", config, "--server", addr, "--token", apiToken)
	cmd.Stdin = strings.NewReader("through the api\n/status\n/stop\n/reset\nafter the reset\n/status\n")
	remote, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(remote), "> ") || !strings.Contains(string(remote), "through the api") {
		t.Fatalf("chat --server: %v %q", err, remote)
	}
	// (/stop may find the lane still finishing the turn's after-work.)
	for _, want := range []string{": idle; 2 messages", "\n(Stopped|Nothing is running)\\.\n", "New session ", "after the reset", ": idle; 2 messages"} {
		loc := regexp.MustCompile(want).FindIndex(remote)
		if loc == nil {
			t.Fatalf("chat --server's commands: no %q in %q", want, remote)
		}
		remote = remote[loc[1]:]
	}
	if err := daemon.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := daemon.Wait(); err != nil {
		t.Fatalf("daemon exit: %v\n%s", err, daemonErr.String())
	}
	if !strings.Contains(daemonErr.String(), "parley stopped") {
		t.Fatalf("daemon did not stop cleanly: %s", daemonErr.String())
	}
}
