package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/llm/llmtest"
	"github.com/parleyd/parley/sessions"
)

// A photo sent over Telegram is kept with its message: a vision model
// sees it again on turn 3 (once, with its message), after a restart, and
// in a branch made from turn 2; a model that can't see images gets its
// line only.
func TestPhotosAreKeptWithTheirMessages(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		img.Set(3, 3, color.RGBA{R: 200, A: 255})
		var pic bytes.Buffer
		if err := png.Encode(&pic, img); err != nil {
			t.Fatal(err)
		}
		wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic.Bytes())
		model := llmtest.NewOpenAIEcho(t, 0)
		tg := telegramtest.NewServer()
		defer tg.Close()
		cfg := "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\"" + apiToken + "\"]\n" + model.ConfigYAML() +
			"agents:\n  - id: default\n    model: openai/gpt-test\n    vision: true\n" +
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
		path := writeConfigAt(t, dbURL, cfg)

		// requestFor is the model request that answered text.
		requestFor := func(text string) llmtest.OpenAIRequest {
			t.Helper()
			var found llmtest.OpenAIRequest
			waitUntil(t, 20*time.Second, "a model request answering "+text, func() bool {
				for _, r := range model.Requests() {
					if strings.Contains(r.LastUser, text) {
						found = r
						return true
					}
				}
				return false
			})
			return found
		}
		sees := func(turn string, r llmtest.OpenAIRequest) {
			t.Helper()
			if len(r.Images) != 1 || r.Images[0] != wantURL {
				t.Fatalf("%s: the model got %d images (%.60q), want the photo once", turn, len(r.Images), r.Images)
			}
		}

		d, url, stop := testDaemonAt(t, path, configuredChannels(t))
		tg.InjectPhoto(42, 42, pic.Bytes(), "what is this?")
		sees("turn 1", requestFor("what is this?"))
		for i, text := range []string{"turn two", "turn three"} {
			tg.InjectText(42, 42, text)
			if _, err := tg.WaitSent(ctx, i+2); err != nil {
				t.Fatal(err)
			}
		}
		sees("turn 3", requestFor("turn three"))
		ss, err := d.sessions.ActiveInChat(ctx, "telegram", "42")
		if err != nil || len(ss) != 1 {
			t.Fatalf("the chat's sessions: %v %v", ss, err)
		}
		msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fd, ok := msgs[0].Parts[0].File()
		if !ok || fd.Stored == "" || !strings.HasPrefix(fd.Stored, "photo-") {
			t.Fatalf("the photo's part %+v (%+v), want it kept in the session's files", msgs[0].Parts, fd)
		}
		if kept, err := d.files.Get(ctx, ss[0].ID, fd.Stored); err != nil || !bytes.Equal(kept.Data, pic.Bytes()) {
			t.Fatalf("the kept photo: %v, %d bytes", err, len(kept.Data))
		}
		var turn2 sessions.MessageID
		for _, m := range msgs {
			if m.Role == sessions.RoleAssistant && strings.Contains(m.Content, "turn two") {
				turn2 = m.ID
			}
		}
		if turn2 == "" {
			t.Fatal("turn 2's reply is not stored")
		}
		stop()

		// After a restart: the photo comes from the store, not Telegram
		// (whose copy is gone).
		tg.AddFile(fmt.Sprintf("photo-42-%d", 1), []byte("gone"))
		d, url, stop = testDaemonAt(t, path, configuredChannels(t))
		defer stop()
		tg.InjectText(42, 42, "after the restart")
		sees("after the restart", requestFor("after the restart"))
		if _, err := tg.WaitSent(ctx, 4); err != nil {
			t.Fatal(err)
		}

		// A branch from turn 2 sees it.
		c := &client.Client{Base: url, Token: apiToken}
		var branch struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+string(ss[0].ID)+"/branch", map[string]any{"from_message_id": turn2}, &branch); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+branch.ID+"/messages", map[string]any{"content": "in the branch"}, &struct{}{}); err != nil {
			t.Fatal(err)
		}
		sees("the branch", requestFor("in the branch"))
		_ = d
	})
}

// Without vision, a kept photo is a line naming it, never an image.
func TestKeptPhotosAreALineForAModelWithoutVision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewOpenAIEcho(t, 0)
	tg := telegramtest.NewServer()
	defer tg.Close()
	_, stop := runWithTelegram(t, tg, model.ConfigYAML()+"agents:\n  - id: default\n    model: openai/gpt-test\n")
	defer stop()
	tg.InjectPhoto(42, 42, pic.Bytes(), "look")
	tg.InjectText(42, 42, "and now?")
	if _, err := tg.WaitSent(ctx, 2); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	for _, r := range reqs {
		if len(r.Images) > 0 {
			t.Fatalf("a model without vision got images: %+v", r)
		}
	}
	if !strings.Contains(reqs[0].LastUser, "[File: photo.jpg, image/jpeg") || !strings.Contains(reqs[0].LastUser, "can't see") {
		t.Fatalf("the photo's message as the model read it: %q", reqs[0].LastUser)
	}
}
