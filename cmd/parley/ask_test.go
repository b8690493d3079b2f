package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/daemon"
)

// parley ask with no daemon running answers in process, in a session of
// its own each time, from arguments or standard input, and --json prints
// the session and reply.
func TestAskInProcess(t *testing.T) {
	path, _ := writeConfig(t, "")
	ctx := context.Background()
	code, out, errOut := parley(t, ctx, "ask", "--config", path, "what", "is", "two")
	if code != 0 || out != "what is two\n" {
		t.Fatalf("ask: exit %d %q %q", code, out, errOut)
	}
	var outBuf, errBuf bytes.Buffer
	code = runWithInput(ctx, []string{"ask", "--json", "--config", path}, strings.NewReader("from standard input\n"), &outBuf, &errBuf)
	var res askResult
	if code != 0 || json.Unmarshal(outBuf.Bytes(), &res) != nil || res.Reply != "from standard input" ||
		!strings.HasPrefix(res.Session, "cli:run:") || res.Error != "" {
		t.Fatalf("ask --json: exit %d %q %q", code, outBuf.String(), errBuf.String())
	}
	if code, _, errOut := parley(t, ctx, "ask", "--config", path); code != 2 || !strings.Contains(errOut, "nothing to ask") {
		t.Fatalf("ask with nothing: exit %d %q", code, errOut)
	}
	// Two asks, two sessions.
	code, out, _ = parley(t, ctx, "sessions", "ls", "--config", path)
	if code != 0 || strings.Count(out, "cli:run:") != 2 {
		t.Fatalf("sessions after two asks:\n%s", out)
	}
}

// With a daemon running, status and ask find it through its run file and
// go through its API; the run file goes when the daemon stops.
func TestAskAndStatusThroughARunningDaemon(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\ncron:\n  jobs:\n    - id: nightly\n      schedule: \"0 3 * * *\"\n      prompt: report\n")
	d := runDaemon(t, context.Background(), path, dbPath)

	code, out, stderr := parley(t, context.Background(), "status", "--config", path, "--json")
	var st daemon.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status: exit %d %q %q", code, out, stderr)
	}
	if st.Listen != addr || st.Engine != "sqlite" || len(st.CronJobs) != 1 || st.CronJobs[0].ID != "nightly" || st.CronJobs[0].Next.IsZero() {
		t.Fatalf("status: %+v", st)
	}
	code, out, stderr = parley(t, context.Background(), "status", "--config", path)
	if code != 0 || !strings.Contains(out, "outbox: 0 pending, 0 failed") || !strings.Contains(out, "nightly") {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = parley(t, context.Background(), "ask", "--config", path, "through the API")
	if code != 0 || out != "through the API\n" {
		t.Fatalf("ask through the daemon: exit %d %q %q", code, out, stderr)
	}
	// It went through the API into a session of its own, cli:run:<time>,
	// as in process, archived once its run ended; no api: session is left.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out, _ = parley(t, context.Background(), "sessions", "ls", "--status", "archived", "--config", path)
		if code == 0 && strings.Count(out, "cli:run:") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("archived sessions after asking the daemon:\n%s", out)
		}
	}
	code, out, _ = parley(t, context.Background(), "sessions", "ls", "--config", path)
	if code != 0 || strings.Count(out, "cli:run:") != 1 || strings.Contains(out, "api:") {
		t.Fatalf("sessions after asking the daemon:\n%s", out)
	}
	// Without a token the status route refuses.
	resp, err := http.Get("http://" + addr + "/v1/status")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status without a token: %v %v", resp, err)
	}
	resp.Body.Close()

	if code := d.stop(); code != 0 {
		t.Fatalf("run exited %d: %s", code, d.errOut)
	}
	if _, err := os.Stat(d.runFile); !os.IsNotExist(err) {
		t.Fatalf("the run file outlived the daemon: %v", err)
	}
	if code, _, stderr := parley(t, context.Background(), "status", "--config", path); code != 1 || !strings.Contains(stderr, "no parley is running") {
		t.Fatalf("status with none running: exit %d %q", code, stderr)
	}
}

// parley chat beside a running daemon finds it through its run file and
// keeps the session cli:chat: what was said in process before is the same
// conversation.
func TestChatBesideTheDaemonKeepsTheCLISession(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n")
	ctx := context.Background()
	var out, errOut bytes.Buffer
	if code := runWithInput(ctx, []string{"chat", "--config", path}, strings.NewReader("first words\n"), &out, &errOut); code != 0 {
		t.Fatalf("chat in process: %d %q %q", code, out.String(), errOut.String())
	}
	d := runDaemon(t, ctx, path, dbPath)
	out.Reset()
	errOut.Reset()
	if code := runWithInput(ctx, []string{"chat", "--config", path}, strings.NewReader("second words\n"), &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "talking to it at http://"+addr) || !strings.Contains(out.String(), "second words") {
		t.Fatalf("chat beside the daemon: %d %q %q", code, out.String(), errOut.String())
	}
	d.stop()
	id, show := onlyCLIChat(t, ctx, path)
	if !strings.Contains(show, "first words") || !strings.Contains(show, "second words") {
		t.Fatalf("the cli:chat session (%s) doesn't hold both:\n%s", id, show)
	}
}

// parley chat beside a daemon that has never seen it opens the session
// cli:chat there, as in process, and keeps it across runs: two runs, one
// session holding both, no API session.
func TestChatBesideTheDaemonOpensCLIChat(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n")
	ctx := context.Background()
	d := runDaemon(t, ctx, path, dbPath)
	for _, words := range []string{"first words", "second words"} {
		var out, errOut bytes.Buffer
		if code := runWithInput(ctx, []string{"chat", "--config", path}, strings.NewReader(words+"\n"), &out, &errOut); code != 0 ||
			!strings.Contains(errOut.String(), "talking to it at http://"+addr) || !strings.Contains(out.String(), words) {
			t.Fatalf("chat beside the daemon: %d %q %q", code, out.String(), errOut.String())
		}
	}
	d.stop()
	id, show := onlyCLIChat(t, ctx, path)
	if !strings.Contains(show, "first words") || !strings.Contains(show, "second words") {
		t.Fatalf("the cli:chat session (%s) doesn't hold both:\n%s", id, show)
	}
}

// parley chat beside a daemon runs /think, /model, /retry and /undo
// through the API's routes, as a chat does: what they change is in the
// stored history and the session's settings.
func TestChatBesideTheDaemonRunsTheChatControls(t *testing.T) {
	addr := freeAddr(t)
	path, dbPath := writeConfig(t, "http:\n  listen: "+addr+"\n  tokens: [\""+apiToken+"\"]\n")
	ctx := context.Background()
	d := runDaemon(t, ctx, path, dbPath)
	var out, errOut bytes.Buffer
	input := "one\ntwo\n/undo\n/retry\n/think loud\n/think high\n/model\n/model nope/x\n"
	if code := runWithInput(ctx, []string{"chat", "--config", path}, strings.NewReader(input), &out, &errOut); code != 0 {
		t.Fatalf("chat: %d %q %q", code, out.String(), errOut.String())
	}
	for _, want := range []string{`Undone: "two" and its answer`, "> one\n", `"loud" is not a thinking level`, "Thinking set to high",
		"Models for this session:\n  echo (in use)", `"nope/x" is not a model this agent allows`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("chat printed no %q:\n%s", want, out.String())
		}
	}
	d.stop()
	code, list, _ := parley(t, ctx, "sessions", "ls", "--config", path)
	id := ""
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, "cli:chat") {
			id = f[0]
		}
	}
	code, show, _ := parley(t, ctx, "sessions", "show", id, "--config", path)
	if code != 0 || strings.Contains(show, "two") || strings.Count(show, "one") < 2 {
		t.Fatalf("the cli:chat session (%s) after /undo and /retry:\n%s", id, show)
	}
}

// onlyCLIChat is the stored id and `parley sessions show` of the one
// cli:chat session at path's database, failing unless there is exactly
// one and no API session.
func onlyCLIChat(t *testing.T, ctx context.Context, path string) (id, show string) {
	t.Helper()
	code, list, _ := parley(t, ctx, "sessions", "ls", "--config", path)
	if code != 0 || strings.Count(list, "cli:chat") != 1 || strings.Contains(list, "api:") {
		t.Fatalf("sessions: one cli:chat and no API session wanted:\n%s", list)
	}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, "cli:chat") {
			id = f[0]
		}
	}
	code, show, _ = parley(t, ctx, "sessions", "show", id, "--config", path)
	if code != 0 {
		t.Fatalf("sessions show %s: exit %d", id, code)
	}
	return id, show
}
