package telegram

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

func TestSend(t *testing.T) {
	tests := []struct {
		name      string
		parseMode string
		out       adapters.Outbound
		want      tt.SentMessage // MessageID ignored
		calls     int            // sendMessage calls
	}{
		{name: "plain", parseMode: "none", out: adapters.Outbound{ChatID: "42", Text: "**as is** <b>"},
			want: tt.SentMessage{ChatID: "42", Text: "**as is** <b>"}, calls: 1},
		{name: "markdown becomes HTML", out: adapters.Outbound{ChatID: "42", Text: "**bold** & `a<b`"},
			want: tt.SentMessage{ChatID: "42", Text: "<b>bold</b> &amp; <code>a&lt;b</code>", ParseMode: "HTML"}, calls: 1},
		{name: "reply", out: adapters.Outbound{ChatID: "-4001", Text: "sure", ReplyTo: "17"},
			want: tt.SentMessage{ChatID: "-4001", Text: "sure", ParseMode: "HTML", ReplyTo: 17}, calls: 1},
		{name: "forum topic", out: adapters.Outbound{ChatID: "-1001234:topic:55", Text: "in the topic"},
			want: tt.SentMessage{ChatID: "-1001234", ThreadID: 55, Text: "in the topic", ParseMode: "HTML"}, calls: 1},
		{name: "html refused, sent plain", parseMode: "html", out: adapters.Outbound{ChatID: "42", Text: "1 <blink>2</blink>"},
			want: tt.SentMessage{ChatID: "42", Text: "1 <blink>2</blink>"}, calls: 2},
		{name: "markdownv2 refused, sent plain", parseMode: "markdownv2", out: adapters.Outbound{ChatID: "42", Text: "Done. *Really*!"},
			want: tt.SentMessage{ChatID: "42", Text: "Done. *Really*!"}, calls: 2},
		{name: "markdownv2 accepted", parseMode: "markdownv2", out: adapters.Outbound{ChatID: "42", Text: "Done\\. *Really*\\!"},
			want: tt.SentMessage{ChatID: "42", Text: "Done\\. *Really*\\!", ParseMode: "MarkdownV2"}, calls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := tt.NewServer()
			defer srv.Close()
			extra := ""
			if tc.parseMode != "" {
				extra = "parse_mode: " + tc.parseMode
			}
			h := newHarness(t, srv, testToken, extra)
			sent, err := h.a.Send(testContext(t), tc.out)
			if err != nil {
				t.Fatal(err)
			}
			got := srv.Sent()
			if len(got) != 1 {
				t.Fatalf("sent %+v", got)
			}
			if sent.MessageID != fmt.Sprint(got[0].MessageID) {
				t.Fatalf("Sent.MessageID %q, the fake gave %d", sent.MessageID, got[0].MessageID)
			}
			tc.want.MessageID = got[0].MessageID
			if got[0] != tc.want {
				t.Fatalf("sent %+v\nwant %+v", got[0], tc.want)
			}
			if n := srv.Calls("sendMessage"); n != tc.calls {
				t.Fatalf("%d sendMessage calls, want %d", n, tc.calls)
			}
		})
	}
}

func TestSendErrors(t *testing.T) {
	tests := []struct {
		name  string
		fail  tt.Failure
		check func(error) bool
	}{
		{"429", tt.Failure{Code: 429, Description: "Too Many Requests: retry after 3", RetryAfter: 3}, func(err error) bool {
			var rl *adapters.RateLimitError
			return errors.As(err, &rl) && rl.RetryAfter == 3*time.Second
		}},
		{"401", tt.Failure{Code: 401, Description: "Unauthorized"}, func(err error) bool { return errors.Is(err, ErrUnauthorized) }},
		{"400", tt.Failure{Code: 400, Description: "Bad Request: chat not found"}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Code == 400 && ae.Method == "sendMessage" && strings.Contains(err.Error(), "chat not found")
		}},
		{"403", tt.Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"}, func(err error) bool {
			var ae *APIError
			return errors.As(err, &ae) && ae.Code == 403 && strings.Contains(err.Error(), "blocked")
		}},
		{"migrated", tt.Failure{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateTo: -1009876}, func(err error) bool {
			var me *MigratedError
			return errors.As(err, &me) && me.ChatID == -1009876
		}},
		{"connection dropped", tt.Failure{Drop: true}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "telegram sendMessage") }},
		{"token echoed back", tt.Failure{Code: 400, Description: "Bad Request: token " + testToken + " not allowed here"}, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "token [redacted] not allowed")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := tt.NewServer()
			defer srv.Close()
			h := newHarness(t, srv, testToken, "")
			srv.Fail("sendMessage", tc.fail)
			_, err := h.a.Send(testContext(t), adapters.Outbound{ChatID: "42", Text: "hi"})
			if !tc.check(err) {
				t.Fatalf("Send = %v (%T)", err, err)
			}
			if strings.Contains(err.Error(), "AAHfake") || strings.Contains(h.log.String(), "AAHfake") {
				t.Fatalf("token shown: %v\n%s", err, h.log)
			}
		})
	}
}

func TestTransportErrorsHideTheToken(t *testing.T) {
	srv := tt.NewServer()
	endpoint := srv.Endpoint()
	srv.Close() // nothing listens there now
	a, err := New("tg", yamlDecoder(fmt.Sprintf("token: %q\napi_endpoint: %q", testToken, endpoint)), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Send(testContext(t), adapters.Outbound{ChatID: "42", Text: "hi"})
	if err == nil || strings.Contains(err.Error(), "AAHfake") || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("Send = %v", err)
	}
	if err := a.Typing(testContext(t), "42"); err == nil || strings.Contains(err.Error(), "AAHfake") {
		t.Fatalf("Typing = %v", err)
	}
}

func TestProxyErrorPage(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
	}))
	defer proxy.Close()
	a, err := New("tg", yamlDecoder(fmt.Sprintf("token: %q\napi_endpoint: %q", testToken, proxy.URL)), adapters.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Send(testContext(t), adapters.Outbound{ChatID: "42", Text: "hi"})
	if err == nil || !strings.Contains(err.Error(), "HTTP 502 Bad Gateway") || !isTransient(err) {
		t.Fatalf("Send = %v", err)
	}
}

func TestChunkedAt4096(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, testToken, "parse_mode: none")
	ctx := testContext(t)
	var b strings.Builder
	for i := 0; b.Len() < 10000; i++ {
		fmt.Fprintf(&b, "Sentence number %d is here. ", i)
	}
	text := strings.TrimSpace(b.String())
	limit := adapters.Limiter(h.a).MaxMessageLength()
	for _, piece := range adapters.Chunk(text, limit) {
		if _, err := h.a.Send(ctx, adapters.Outbound{ChatID: "42", Text: piece}); err != nil {
			t.Fatal(err) // the fake refuses more than 4096
		}
	}
	sent := srv.Sent()
	if len(sent) != 3 {
		t.Fatalf("%d messages, want 3", len(sent))
	}
	var joined []string
	for _, m := range sent {
		if n := utf8.RuneCountInString(m.Text); n > 4096 || n < 1000 {
			t.Fatalf("piece of %d characters", n)
		}
		joined = append(joined, m.Text)
	}
	if strings.Join(joined, " ") != text {
		t.Fatal("pieces don't add up to the text")
	}

	// 4096 runes of emoji are 8192 UTF-16 units: Send splits once more.
	emoji := strings.Repeat("😀", 4096)
	sentMsg, err := h.a.Send(ctx, adapters.Outbound{ChatID: "43", Text: emoji})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, m := range srv.Sent()[3:] {
		got += m.Text
	}
	last := srv.Sent()[len(srv.Sent())-1]
	if got != emoji || len(srv.Sent()) != 6 || sentMsg.MessageID != fmt.Sprint(last.MessageID) {
		t.Fatalf("emoji sent as %d messages; Sent %q, last %d", len(srv.Sent())-3, sentMsg.MessageID, last.MessageID)
	}
}

func TestEditTypingAndFiles(t *testing.T) {
	srv := tt.NewServer()
	defer srv.Close()
	h := newHarness(t, srv, testToken, "")
	ctx := testContext(t)

	sent, err := h.a.Send(ctx, adapters.Outbound{ChatID: "-1001234:topic:55", Text: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.a.Edit(ctx, "-1001234:topic:55", sent.MessageID, "**final** text"); err != nil {
		t.Fatal(err)
	}
	// The same text again: Telegram says "not modified", which is no error.
	if err := h.a.Edit(ctx, "-1001234:topic:55", sent.MessageID, "**final** text"); err != nil {
		t.Fatalf("unchanged edit: %v", err)
	}
	edits := srv.Edits()
	if len(edits) != 1 || edits[0].ChatID != "-1001234" || fmt.Sprint(edits[0].MessageID) != sent.MessageID ||
		edits[0].Text != "<b>final</b> text" || edits[0].ParseMode != "HTML" {
		t.Fatalf("edits %+v", edits)
	}
	var ae *APIError
	if err := h.a.Edit(ctx, "42", "999", "x"); !errors.As(err, &ae) || !strings.Contains(ae.Description, "message to edit not found") {
		t.Fatalf("edit of an unknown message: %v", err)
	}
	if err := h.a.Edit(ctx, "42", "1", strings.Repeat("x", 4097)); err == nil || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("long edit: %v", err)
	}

	if err := h.a.Typing(ctx, "-1001234:topic:55"); err != nil {
		t.Fatal(err)
	}
	if err := h.a.Typing(ctx, "42"); err != nil {
		t.Fatal(err)
	}
	acts := srv.Actions()
	if len(acts) != 2 || acts[0] != (tt.ChatAction{ChatID: "-1001234", ThreadID: 55, Action: "typing"}) || acts[1] != (tt.ChatAction{ChatID: "42", Action: "typing"}) {
		t.Fatalf("actions %+v", acts)
	}

	srv.AddFile("doc1", []byte("%PDF-1.7 content"))
	rc, err := h.a.OpenFile(ctx, adapters.FileRef{ID: "doc1", Name: "report.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "%PDF-1.7 content" {
		t.Fatalf("file %q", data)
	}
	if _, err := h.a.OpenFile(ctx, adapters.FileRef{ID: "nope"}); err == nil || strings.Contains(err.Error(), "AAHfake") {
		t.Fatalf("unknown file: %v", err)
	}

	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	srv.AddFile("photo1", png)
	data, typ, err := h.a.Fetch(ctx, adapters.FileRef{ID: "photo1"}, 1000)
	if err != nil || len(data) != len(png) || typ != "image/png" {
		t.Fatalf("Fetch = %d bytes, %q, %v", len(data), typ, err)
	}
	if _, typ, _ := h.a.Fetch(ctx, adapters.FileRef{ID: "photo1", MediaType: "image/jpeg"}, 0); typ != "image/jpeg" {
		t.Fatalf("media type %q, want the message's", typ)
	}
	calls := srv.Calls("getFile")
	if _, _, err := h.a.Fetch(ctx, adapters.FileRef{ID: "photo1", Size: 5000}, 1000); !errors.Is(err, adapters.ErrTooLarge) || srv.Calls("getFile") != calls {
		t.Fatalf("over the limit by the message's size: %v (getFile called: %v)", err, srv.Calls("getFile") != calls)
	}
	if _, _, err := h.a.Fetch(ctx, adapters.FileRef{ID: "photo1"}, 50); !errors.Is(err, adapters.ErrTooLarge) {
		t.Fatalf("over the limit by getFile's size: %v", err)
	}
	srv.Fail("getFile", tt.Failure{Code: 400, Description: "Bad Request: file is too big"})
	if _, _, err := h.a.Fetch(ctx, adapters.FileRef{ID: "photo1"}, 0); !errors.Is(err, adapters.ErrTooLarge) {
		t.Fatalf("Telegram's file is too big: %v", err)
	}

	if _, err := h.a.Send(ctx, adapters.Outbound{ChatID: "42", Text: "  "}); err == nil {
		t.Fatal("empty message sent")
	}
	if _, err := h.a.Send(ctx, adapters.Outbound{ChatID: "42:topic:x", Text: "x"}); err == nil {
		t.Fatal("bad chat id accepted")
	}
}
