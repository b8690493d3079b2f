package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/doctor"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/runfile"
)

// doctor checks every part against fakes at the wire: a working Telegram
// token and a refused one, a provider that answers and one that refuses the
// key, an agent with no key; it says what to do and exits 1 on a failure.
func TestDoctor(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	good := llmtest.NewOpenAIEcho(t, 0)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	}))
	defer refusing.Close()
	extra := "adapters:\n  - id: tg-good\n    type: telegram\n" + indentYAML(tg.ConfigYAML(), "    ") +
		"  - id: tg-bad\n    type: telegram\n    token: \"999:refused-token\"\n    api_endpoint: " + tg.Endpoint() + "\n" +
		good.ConfigYAML() + "  anthropic:\n    api_key: sk-ant-refused-000000000000\n    base_url: " + refusing.URL + "\n" +
		"agents:\n  - id: default\n    model: openai/gpt-test\n  - id: claude\n    model: anthropic/claude-test\n"
	path, dbPath := writeConfig(t, extra)
	if code, _, errOut := parley(t, context.Background(), "doctor", "--config", path); code != 1 || fileExists(dbPath) {
		t.Fatalf("doctor before the database exists: exit %d %q; it must not create it", code, errOut)
	}
	if code, _, errOut := parley(t, context.Background(), "migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: %q", errOut)
	}
	good.Calls.Store(0)
	code, out, errOut := parley(t, context.Background(), "doctor", "--config", path, "--json")
	var findings []doctor.Finding
	if code != 1 || json.Unmarshal([]byte(out), &findings) != nil {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	got := map[string]doctor.Finding{}
	for _, f := range findings {
		got[f.Check] = f
	}
	for check, want := range map[string]string{
		"config": "ok", "database": "ok", "disk": "ok", "channel tg-good": "ok", "channel tg-bad": "fail",
		"provider openai": "ok", "provider anthropic": "fail", "clock": "ok",
	} {
		if got[check].Status != want {
			t.Errorf("%s: %q, want %q (%+v)", check, got[check].Status, want, got[check])
		}
	}
	if f := got["channel tg-bad"]; !strings.Contains(f.Detail, "refused the bot token") || f.Fix == "" {
		t.Errorf("a refused token says %+v", f)
	}
	if f := got["channel tg-good"]; !strings.Contains(f.Detail, "@") {
		t.Errorf("a good token says %+v", f)
	}
	if f := got["provider anthropic"]; !strings.Contains(f.Fix, "providers.anthropic.api_key") {
		t.Errorf("a refused key says %+v", f)
	}
	if good.Calls.Load() != 1 {
		t.Errorf("the openai fake had %d calls, want the one check", good.Calls.Load())
	}
	for _, secret := range []string{"sk-ant-refused", "refused-token", "sk-test-fake-key"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("doctor shows a secret %q:\n%s", secret, out)
		}
	}
	// The text form says what to do.
	code, out, _ = parley(t, context.Background(), "doctor", "--config", path)
	if code != 1 || !strings.Contains(out, "fail  channel tg-bad") || !strings.Contains(out, "→ fix the channel's token") {
		t.Fatalf("doctor text: exit %d\n%s", code, out)
	}
	// A config with nothing wrong passes (on a port nothing holds), and
	// names the database it checked.
	free := freeAddr(t)
	path, dbPath = writeConfig(t, "http:\n  listen: "+free+"\n")
	if code, _, errOut := parley(t, context.Background(), "migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: %q", errOut)
	}
	code, out, errOut = parley(t, context.Background(), "doctor", "--config", path)
	if code != 0 || strings.Contains(out, "fail") || !strings.Contains(out, "ok    port http.listen") {
		t.Fatalf("doctor on the defaults: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "sqlite at "+dbPath+" reachable") {
		t.Errorf("doctor does not name the configured database %s:\n%s", dbPath, out)
	}
}

// doctor fails what parley run would fail at or never answer: a port
// another program holds, an agent whose provider has no key.
func TestDoctorFailsWhatWillFail(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	path, _ := writeConfig(t, "http:\n  listen: "+held.Addr().String()+"\n  ops_listen: "+freeAddr(t)+"\n"+
		"agents:\n  - id: main\n    model: anthropic/claude-test\n")
	code, out, errOut := parley(t, context.Background(), "doctor", "--config", path, "--json")
	var findings []doctor.Finding
	if code != 1 || json.Unmarshal([]byte(out), &findings) != nil {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	got := map[string]doctor.Finding{}
	for _, f := range findings {
		got[f.Check] = f
	}
	if f := got["port http.listen"]; f.Status != doctor.FindingFail || !strings.Contains(f.Detail, "in use by another program") || !strings.Contains(f.Fix, "set http.listen") {
		t.Errorf("a port in use: %+v", f)
	}
	if f := got["port http.ops_listen"]; f.Status != doctor.FindingOK {
		t.Errorf("a free ops port: %+v", f)
	}
	if f := got["agent main"]; f.Status != doctor.FindingFail || !strings.Contains(f.Fix, "providers.anthropic.api_key") {
		t.Errorf("an agent without a key: %+v", f)
	}
	// The running parley's own port is not another program's.
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(runfile.Path(cfg)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := runfile.Write(runfile.Path(cfg), runfile.Running{PID: os.Getpid(), Listen: held.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	_, out, _ = parley(t, context.Background(), "doctor", "--config", path)
	if !strings.Contains(out, "in use by the parley running on this config") {
		t.Errorf("doctor beside the running parley:\n%s", out)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
