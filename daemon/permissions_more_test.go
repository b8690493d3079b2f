package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/sessions"
)

// A channel without buttons (WhatsApp, the terminal) asks with a numbered
// list, and the person's next message, a number, answers it instead of
// becoming a turn; "2" is "Always in this chat".
func TestPermissionNumberedReply(t *testing.T) {
	rec := adapterstest.New()
	d, _, stop := testDaemon(t, "gateway:\n  debounce: 0s\n"+askingAgent, func(d *Daemon) map[adapters.ID]adapters.Adapter {
		return map[adapters.ID]adapters.Adapter{"wa": rec}
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	say := func(text string) {
		t.Helper()
		in := adapters.Inbound{Adapter: "wa", Surface: "whatsapp", ChatID: "c1", UserID: "u1", DisplayName: "Ann",
			MessageID: uuid.NewString(), Text: text, Time: time.Now()}
		for {
			err := rec.Inject(ctx, in)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // until the channel has started
		}
	}
	waitFor := func(text string) int {
		t.Helper()
		sent, err := rec.WaitSent(ctx, 1)
		for err == nil {
			for i, o := range sent {
				if strings.Contains(o.Text, text) {
					return i
				}
			}
			sent, err = rec.WaitSent(ctx, len(sent)+1)
		}
		t.Fatalf("no %q sent: %v", text, err)
		return 0
	}

	searchTurn(d, "w1", "searched")
	say("plans?")
	i := waitFor("Reply with a number:")
	if q := rec.Sent()[i].Text; !strings.Contains(q, "memory_search") || !strings.Contains(q, "2. Always in this chat") {
		t.Fatalf("question %q", q)
	}
	say("2")
	waitFor("searched")
	if got := toolResults(d, "w1"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("tool result after 2: %q", got)
	}
	// "2" answered; it is no message of the conversation.
	s, err := d.sessions.Active(ctx, sessions.ChatKey("whatsapp", "c1", "u1", "default"))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := d.sessions.Messages(ctx, s.ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Content == "2" {
			t.Fatal("the answer became a message of the conversation")
		}
	}
	// Allowed in this chat: no more questions.
	n := len(rec.Sent())
	searchTurn(d, "w2", "searched again")
	say("and now?")
	waitFor("searched again")
	for _, o := range rec.Sent()[n:] {
		if strings.Contains(o.Text, "Reply with a number") {
			t.Fatalf("asked again: %q", o.Text)
		}
	}
	// A number with no question waiting is an ordinary message (echo
	// answers it with itself).
	n = len(rec.Sent())
	say("3")
	sent, err := rec.WaitSent(ctx, n+1)
	if err != nil || sent[n].Text != "3" {
		t.Fatalf("after 3: %+v %v", sent[n:], err)
	}
}

// Over the API a question is a permission.requested event, answered with
// POST /v1/sessions/{id}/permissions/{request_id}; a wrong session, an
// unknown id or an answer not offered is refused, saying why.
func TestPermissionOverTheAPI(t *testing.T) {
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, url, stop := permDaemon(t, tg, askingAgent)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, url+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	_, sess := call("POST", "/v1/sessions", map[string]any{})
	id, _ := sess["id"].(string)
	_, other := call("POST", "/v1/sessions", map[string]any{"user": "someone"})
	otherID, _ := other["id"].(string)
	if id == "" || otherID == "" {
		t.Fatalf("sessions %v %v", sess, other)
	}
	searchTurn(d, "a1", "api searched")
	status, run := call("POST", "/v1/sessions/"+id+"/messages", map[string]any{"content": "plans?"})
	if status != 202 {
		t.Fatalf("send: %d %v", status, run)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/sessions/"+id+"/events?run_id="+run["run_id"].(string), nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	next := func(typ string) json.RawMessage {
		t.Helper()
		for events.Scan() {
			data, ok := strings.CutPrefix(events.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == typ {
				return ev.Data
			}
		}
		t.Fatalf("no %s event: %v", typ, events.Err())
		return nil
	}
	var asked struct {
		RequestID string          `json:"request_id"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Choices   []string        `json:"choices"`
		ExpiresAt time.Time       `json:"expires_at"`
	}
	if err := json.Unmarshal(next("permission.requested"), &asked); err != nil {
		t.Fatal(err)
	}
	if asked.Tool != "memory_search" || string(asked.Arguments) != `{"query":"plans"}` || len(asked.Choices) != 4 || asked.ExpiresAt.Before(time.Now()) {
		t.Fatalf("permission.requested %+v", asked)
	}
	if status, st := call("GET", "/v1/sessions/"+id+"/status", nil); st["state"] != "waiting_for_permission" {
		t.Fatalf("status while asking: %d %v", status, st)
	}
	path := "/v1/sessions/" + id + "/permissions/" + asked.RequestID
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/v1/sessions/" + otherID + "/permissions/" + asked.RequestID, map[string]any{"answer": "once"}, 404},
		{"/v1/sessions/" + id + "/permissions/nope", map[string]any{"answer": "once"}, 404},
		{path, map[string]any{"answer": "maybe"}, 400},
		{path, map[string]any{}, 400},
	} {
		if status, out := call("POST", tc.path, tc.body); status != tc.want || out["error"] == nil {
			t.Fatalf("POST %s %v: %d %v, want %d", tc.path, tc.body, status, out, tc.want)
		}
	}
	status, out := call("POST", path, map[string]any{"answer": "once"})
	if status != 200 || out["tool"] != "memory_search" || out["answer"] != "once" {
		t.Fatalf("answer: %d %v", status, out)
	}
	var resolved struct {
		RequestID string `json:"request_id"`
		Answer    string `json:"answer"`
	}
	if err := json.Unmarshal(next("permission.resolved"), &resolved); err != nil || resolved.RequestID != asked.RequestID || resolved.Answer != "once" {
		t.Fatalf("permission.resolved %+v %v", resolved, err)
	}
	next("turn.finished")
	if got := toolResults(d, "a1"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("tool result after the API's answer: %q", got)
	}
	if status, _ := call("POST", path, map[string]any{"answer": "once"}); status != 404 {
		t.Fatalf("answering twice: %d", status)
	}
}

// A webhook has nobody to ask either: the sync reply (and the delivery's
// record) begins with what was not run and why; a hook whose allow_tools
// names the tool runs it.
func TestPermissionWebhookDenies(t *testing.T) {
	hooks := "hooks:\n" +
		"  - id: ci\n    auth: hmac\n    secret: " + hookSecret + "\n    mode: sync\n    timeout: 20s\n    prompt: \"CI failed on {{.repo}}\"\n" +
		"  - id: trusted\n    auth: hmac\n    secret: " + hookSecret + "\n    mode: sync\n    timeout: 20s\n    prompt: \"deploy {{.repo}}\"\n" +
		"    allow_tools: [memory_search]\n"
	d, _, url, stop := runWithHooks(t, askingAgent+hooks)
	defer stop()

	searchTurn(d, "h1", "could not search")
	status, out := postHook(t, http.DefaultClient, url+"/hooks/ci", []byte(`{"repo":"parley"}`))
	want := `Not run: memory_search: it needs a person's approval (the agent's config says "memory_search: ask"), ` +
		`and nobody is there to ask in webhook "ci"; the operator can allow it with hooks[0].allow_tools`
	if reply, _ := out["reply"].(string); status != 200 || !strings.HasPrefix(reply, want) || !strings.HasSuffix(reply, "could not search") {
		t.Fatalf("the hook's reply: %d %q", status, out["reply"])
	}
	if got := toolResults(d, "h1"); len(got) != 1 || !strings.HasPrefix(got[0], "error: permission denied") {
		t.Fatalf("tool result: %q", got)
	}

	searchTurn(d, "h2", "searched")
	status, out = postHook(t, http.DefaultClient, url+"/hooks/trusted", []byte(`{"repo":"parley"}`))
	if status != 200 || out["reply"] != "searched" {
		t.Fatalf("the trusted hook's reply: %d %v", status, out)
	}
	if got := toolResults(d, "h2"); len(got) != 1 || strings.HasPrefix(got[0], "error:") {
		t.Fatalf("tool result: %q", got)
	}
}
