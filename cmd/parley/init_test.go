package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/internal/browsertest"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/llm/llmtest"
)

// The path a new operator takes: parley init --yes with a Telegram token
// and an OpenAI-compatible provider (fakes at the wire), then parley run on
// what it wrote, then a chat through the web page in a browser, answered
// by the provider.
func TestInitThenRunThenChatInTheBrowser(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	model := llmtest.NewOpenAIEcho(t, 0)
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.yaml")
	addr := freeAddr(t)
	start := time.Now()
	code, out, errOut := parley(t, context.Background(), "init", "--yes", "--config", path, "--listen", addr,
		"--database", filepath.Join(dir, "data", "parley.db"),
		"--telegram-token", tg.Token, "--telegram-api-endpoint", tg.Endpoint(),
		"--provider", "openai", "--api-key", "sk-init-test-0000000000000000", "--base-url", model.URL+"/v1", "--model", "gpt-test")
	if code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"checking the Telegram token... ok @", "checking the key with a one-token call of gpt-test... ok",
		"parley run --config " + path, "http://" + addr + "/#token=", "parley pairing approve CODE"} {
		if !strings.Contains(out, want) {
			t.Errorf("init's output has no %q:\n%s", want, out)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the config's mode: %v %v", fi, err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.HTTP.Tokens) != 1 || len(cfg.HTTP.Tokens[0].Reveal()) < 32 || len(cfg.HTTP.CallbackSecret.Reveal()) < 32 ||
		len(cfg.Adapters) != 1 || cfg.Adapters[0].Type != "telegram" || cfg.Agents[0].Model != "openai/gpt-test" {
		t.Fatalf("the config written: %+v", cfg)
	}
	// A second init doesn't overwrite it.
	if code, _, errOut := parley(t, context.Background(), "init", "--yes", "--config", path); code != 1 || !strings.Contains(errOut, "--force") {
		t.Fatalf("init over an existing file: exit %d %q", code, errOut)
	}

	chatInTheBrowser(t, path, addr, cfg.HTTP.Tokens[0].Reveal(), "hello from the first run")
	t.Logf("init to the first reply in the browser: %s", time.Since(start).Round(time.Millisecond))
	if model.Calls.Load() < 2 { // the init check, and the turn
		t.Fatalf("the provider had %d calls", model.Calls.Load())
	}
}

// chatInTheBrowser runs parley on the config at path, listening on addr,
// and has a message answered in the web chat, opened with token.
func chatInTheBrowser(t *testing.T, path, addr, token, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	runErr := &syncWriter{w: &bytes.Buffer{}}
	go func() {
		done <- run(runCtx, []string{"run", "--config", path}, &bytes.Buffer{}, runErr)
	}()
	defer func() {
		stop()
		<-done
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("parley run on init's config never became ready:\n%s", runErr.String())
		}
	}
	p := browsertest.Open(t, ctx, "http://"+addr+"/#token="+token)
	p.Eval(`document.getElementById("text").value = `+strconv.Quote(text), nil)
	p.Eval(`document.querySelector("#send button").click()`, nil)
	p.WaitTrue(`[...document.querySelectorAll(".msg.assistant")].some(b => b.dataset.done && b.textContent.includes(`+strconv.Quote(text)+`))`, 60*time.Second)
	if !strings.Contains(runErr.String(), `web_chat=http://`+addr+`/`) || !strings.Contains(runErr.String(), `dashboard=http://`+addr+`/admin`) {
		t.Errorf("the start-up log doesn't say where the web chat and the dashboard are:\n%s", runErr.String())
	}
}

// Asked on its input, init reaches a local OpenAI-compatible server (as
// Ollama or LM Studio would be) at the base URL given, lists its models
// to pick from by number, checks the one picked, and the first reply on
// the config it wrote comes from that model, in the web chat.
func TestInitReachesAnOpenAICompatibleServer(t *testing.T) {
	model := llmtest.NewOpenAIEcho(t, 0)
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.yaml")
	addr := freeAddr(t)
	answers := strings.Join([]string{
		addr,                       // address
		filepath.Join(dir, "p.db"), // database
		"",                         // Telegram: skip
		"",                         // Discord: skip
		"n",                        // WhatsApp: no
		"compatible",               // provider
		model.URL + "/v1",          // the server's base URL
		"",                         // no API key
		"2",                        // the second model it lists
	}, "\n") + "\n"
	var out, errOut bytes.Buffer
	if code := runWithInput(context.Background(), []string{"init", "--config", path}, strings.NewReader(answers), &out, &errOut); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"Ollama listens at http://localhost:11434/v1", "1. gpt-test", "2. llama-test:8b", "3. qwen-test:14b",
		"checking the server with a one-token call of llama-test:8b... ok", "Dashboard:     http://" + addr + "/admin"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("init's dialogue has no %q:\n%s", want, out.String())
		}
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agents[0].Model != "openai/llama-test:8b" || cfg.Providers["openai"].BaseURL != model.URL+"/v1" || cfg.Providers["openai"].APIKey.Reveal() != "" {
		t.Fatalf("the config written: agent %+v, provider %+v", cfg.Agents[0], cfg.Providers["openai"])
	}
	chatInTheBrowser(t, path, addr, cfg.HTTP.Tokens[0].Reveal(), "hello, local model")
	reqs := model.Requests()
	if last := reqs[len(reqs)-1]; last.Model != "llama-test:8b" || last.LastUser != "hello, local model" {
		t.Fatalf("the server's last request: %+v", last)
	}
}

// A check that fails can be kept, to be checked later with parley doctor:
// a server not yet running, say.
func TestInitKeepsAnAnswerToCheckLater(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.yaml")
	answers := strings.Join([]string{
		"127.0.0.1:0", filepath.Join(dir, "p.db"), "", "", "n",
		"compatible",
		"http://" + freeAddr(t) + "/v1", // nothing listens there yet
		"",                              // no API key
		"llama3.2",                      // the model, named: none could be listed
		"y",                             // keep it anyway
	}, "\n") + "\n"
	var out, errOut bytes.Buffer
	if code := runWithInput(context.Background(), []string{"init", "--config", path}, strings.NewReader(answers), &out, &errOut); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"couldn't list the server's models: no answer from", "is the server running there?",
		"checking the server with a one-token call of llama3.2... no", "check them later with parley doctor"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("init's dialogue has no %q:\n%s", want, out.String())
		}
	}
	cfg, err := config.Load(path)
	if err != nil || cfg.Agents[0].Model != "openai/llama3.2" {
		t.Fatalf("the config kept: %v %+v", err, cfg)
	}
}

// Asked on its input, init takes the answers, re-asks after a refused
// token, and writes the offline echo model when no provider is chosen.
func TestInitAsks(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.yaml")
	answers := strings.Join([]string{
		"127.0.0.1:0",              // address
		filepath.Join(dir, "p.db"), // database
		"1:refused",                // Telegram: refused
		"n",                        // keep it anyway? no
		tg.Token,                   // Telegram again
		"",                         // Discord: skip
		"n",                        // WhatsApp: no
		"echo",                     // provider
	}, "\n") + "\n"
	var out, errOut bytes.Buffer
	code := runWithInput(context.Background(), []string{"init", "--config", path, "--telegram-api-endpoint", tg.Endpoint()},
		strings.NewReader(answers), &out, &errOut)
	if code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "refused the bot token") || !strings.Contains(out.String(), "checking the Telegram token... ok @") {
		t.Fatalf("init's dialogue:\n%s", out.String())
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "model: echo") || !strings.Contains(string(b), tg.Token) || strings.Contains(string(b), "1:refused") {
		t.Fatalf("the config written:\n%s", b)
	}
}

// init offers the providers registered with llm.Register, each with its
// key's variable, and refuses another naming them: adding a provider
// needs no edit here.
func TestInitOffersTheRegisteredProviders(t *testing.T) {
	var names []string
	for _, p := range llm.Registered() {
		names = append(names, p.Name)
		if p.KeyEnv == "" || p.SmallModel == "" {
			t.Errorf("provider %s registers no KeyEnv or SmallModel for init to offer", p.Name)
		}
	}
	if len(names) < 2 {
		t.Fatalf("registered providers %q", names)
	}
	dir := t.TempDir()
	code, out, errOut := parley(t, context.Background(), "init", "--yes", "--no-check", "--provider", "nope", "--config", filepath.Join(dir, "parley.yaml"))
	want := `--provider "nope"; use ` + strings.Join(names, ", ") + ", compatible or echo"
	if code == 0 || !strings.Contains(out+errOut, want) {
		t.Fatalf("init --provider nope: exit %d, %s%s; want it to say %q", code, out, errOut, want)
	}
	_, help, helpErr := parley(t, context.Background(), "init", "--help")
	for _, p := range llm.Registered() {
		if !strings.Contains(help+helpErr, "$"+p.KeyEnv) {
			t.Fatalf("init --help does not name $%s:\n%s%s", p.KeyEnv, help, helpErr)
		}
	}
}
