package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
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
	_, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	bctx, bcancel := context.WithTimeout(ctx, 120*time.Second)
	defer bcancel()
	// --dump-dom prints the page once its virtual-time budget is spent; on
	// a loaded machine the streamed reply can miss that moment, so the page
	// is loaded again (a fresh session each time) up to six times.
	// The assistant's bubble fills from the run's event stream; its text
	// holding the echo shows the reply streamed into the page (the stream's
	// end may come after the dump).
	finished := regexp.MustCompile(`<div class="msg assistant"[^>]*>([^<]*hello from the browser[^<]*)</div>`)
	var dom string
	for attempt := range 6 {
		cmd := exec.CommandContext(bctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+t.TempDir(), fmt.Sprintf("--virtual-time-budget=%d", 20000*(attempt+1)), "--dump-dom",
			url+"/#token="+apiToken+"&say=hello%20from%20the%20browser")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
		dom = string(out)
		if finished.MatchString(dom) {
			return
		}
	}
	t.Fatalf("no finished reply in the page:\n%s", dom)
}
