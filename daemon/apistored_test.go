package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/client"

	"github.com/parleyd/parley/sessions"
)

// What an API client sends is what is stored and what the model reads: a
// session created without a user (keyed like a group's) gets no sender's
// name before its messages, nor does one with a user, nor `parley chat`
// against a running daemon (an API session of its own).
func TestAPIStoresWhatTheClientSent(t *testing.T) {
	d, url, stop := testDaemon(t, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	post := func(path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", url+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	// userMessages waits for the session's reply, then returns what its
	// user messages store and what the model was sent.
	userMessages := func(id string) []string {
		t.Helper()
		for {
			msgs, err := d.sessions.Messages(ctx, sessions.ID(id), sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var user []string
			replied := false
			for _, m := range msgs {
				switch m.Role {
				case sessions.RoleUser:
					user = append(user, m.Content)
				case sessions.RoleAssistant:
					replied = true
				}
			}
			if replied {
				return user
			}
			select {
			case <-ctx.Done():
				t.Fatalf("session %s: no reply (%+v)", id, msgs)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	for _, body := range []map[string]any{{"title": "no user"}, {"title": "with a user", "user": "ann"}} {
		id := post("/v1/sessions", body)["id"].(string)
		post("/v1/sessions/"+id+"/messages", map[string]any{"content": "Hello"})
		if got := userMessages(id); len(got) != 1 || got[0] != "Hello" {
			t.Errorf("session %v stores %q, want [\"Hello\"]", body, got)
		}
	}
	for _, r := range d.offline.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "api: ") {
				t.Errorf("the model was sent %q", m.Content)
			}
		}
	}

	var out bytes.Buffer
	if err := client.Chat(ctx, url, apiToken, strings.NewReader("Hello\n"), &out); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\(session ([0-9a-f-]+)\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("parley chat printed %q", out.String())
	}
	if got := userMessages(m[1]); len(got) != 1 || got[0] != "Hello" {
		t.Errorf("parley chat's session stores %q, want [\"Hello\"]", got)
	}
}
