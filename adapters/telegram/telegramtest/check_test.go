package telegramtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestCheckHTML(t *testing.T) {
	tests := []struct {
		in, shown string
		bad       string // part of the error; "" if it parses
	}{
		{in: "<b>x</b> &amp; &lt;y&gt; &#33; & plain", shown: "x & <y> ! & plain"},
		{in: `<a href="https://x">l</a><pre><code class="language-go">c</code></pre>`, shown: "lc"},
		{in: "<blink>x</blink>", bad: `Unsupported start tag "blink"`},
		{in: "<b>x", bad: `Can't find end tag corresponding to start tag "b"`},
		{in: "x</b>", bad: "Unexpected end tag"},
		{in: "<b><i>x</b></i>", bad: "Unmatched end tag"},
		{in: "a < b > c", bad: "Unsupported start tag"},
		{in: "a <b", bad: "Unclosed start tag"},
	}
	for _, tc := range tests {
		shown, err := CheckHTML(tc.in)
		switch {
		case tc.bad == "" && (err != nil || shown != tc.shown):
			t.Errorf("CheckHTML(%q) = %q, %v; want %q", tc.in, shown, err, tc.shown)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("CheckHTML(%q) error %v, want %q", tc.in, err, tc.bad)
		}
	}
	for in, ok := range map[string]bool{"a\\.b": true, "*b* _i_ `x.y`": true, "a.b": false, "*b": false, "```\n.\n```": true, "wow!": false} {
		if err := CheckMarkdownV2(in); (err == nil) != ok {
			t.Errorf("CheckMarkdownV2(%q) = %v", in, err)
		}
	}
}

// TestServerSpeaksTheBotAPI checks the fake's wire behaviour directly:
// offsets confirm, long polls wait for an update, failures are given once.
func TestServerSpeaksTheBotAPI(t *testing.T) {
	s := NewServer()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(token, method string, v url.Values) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf(s.Endpoint(), token, method), strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if r := call("1:wrong", "getMe", nil); r["ok"] != false || r["error_code"] != 401.0 {
		t.Fatalf("wrong token: %v", r)
	}
	if r := call(Token, "getMe", nil); r["result"].(map[string]any)["username"] != BotUsername {
		t.Fatalf("getMe: %v", r)
	}
	id := s.InjectText(42, 42, "a")
	s.InjectText(42, 42, "b")
	if r := call(Token, "getUpdates", url.Values{"limit": {"1"}}); len(r["result"].([]any)) != 1 {
		t.Fatalf("limit 1: %v", r)
	}
	if r := call(Token, "getUpdates", url.Values{"offset": {fmt.Sprint(id + 1)}}); len(r["result"].([]any)) != 1 || s.Confirmed() != id+1 || s.Pending() != 1 {
		t.Fatalf("offset: %v, confirmed %d", r, s.Confirmed())
	}
	// A long poll returns when an update arrives.
	go func() {
		_, _ = s.WaitPolls(ctx, 3)
		s.InjectText(43, 43, "late")
	}()
	if r := call(Token, "getUpdates", url.Values{"offset": {fmt.Sprint(id + 2)}, "timeout": {"5"}}); len(r["result"].([]any)) != 1 {
		t.Fatalf("long poll: %v", r)
	}
	s.Fail("sendMessage", Failure{Code: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7})
	r := call(Token, "sendMessage", url.Values{"chat_id": {"42"}, "text": {"x"}})
	if r["error_code"] != 429.0 || r["parameters"].(map[string]any)["retry_after"] != 7.0 {
		t.Fatalf("429: %v", r)
	}
	if r := call(Token, "sendMessage", url.Values{"chat_id": {"42"}, "text": {"x"}}); r["ok"] != true {
		t.Fatalf("after the failure: %v", r)
	}
	if r := call(Token, "sendMessage", url.Values{"chat_id": {"42"}, "text": {strings.Repeat("x", 4097)}}); r["description"] != "Bad Request: message is too long" {
		t.Fatalf("too long: %v", r)
	}
}
