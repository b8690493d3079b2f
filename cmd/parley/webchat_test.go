package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/config"
)

// A real browser loads the web chat, sends a message through the page's own
// send path, and shows the streamed echo reply.
func TestWebChatInABrowser(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium is not installed (apt-get install chromium); the web chat's browser test needs it")
	}
	ctx := context.Background()
	path, _ := writeConfig(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := startDaemon(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	d.adapters = map[adapters.ID]adapters.Adapter{"api": apiChannel{}}
	hs := httptest.NewServer(newHTTPHandler(d.db, d.adapters, d.apiHandler()))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.run(runCtx) }()
	defer func() {
		hs.Close()
		cancel()
		<-done
		d.close()
	}()
	bctx, bcancel := context.WithTimeout(ctx, 90*time.Second)
	defer bcancel()
	cmd := exec.CommandContext(bctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=20000", "--dump-dom",
		hs.URL+"/#token="+apiToken+"&say=hello%20from%20the%20browser")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	dom := string(out)
	reply := regexp.MustCompile(`<div class="msg assistant" data-done="true">([^<]*)</div>`).FindStringSubmatch(dom)
	if reply == nil || !strings.Contains(reply[1], "hello from the browser") {
		t.Fatalf("no finished reply in the page:\n%s", dom)
	}
}
