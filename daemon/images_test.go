package daemon

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/media"
)

// fetchingRecorder is a channel whose files can be fetched.
type fetchingRecorder struct {
	*adapterstest.Recorder
	files map[string][]byte
}

func (f fetchingRecorder) Fetch(_ context.Context, ref adapters.FileRef, maxBytes int64) ([]byte, string, error) {
	b, ok := f.files[ref.ID]
	if !ok {
		return nil, "", fmt.Errorf("no file %s", ref.ID)
	}
	if int64(len(b)) > maxBytes {
		return nil, "", fmt.Errorf("file %s: %w", ref.ID, adapters.ErrTooLarge)
	}
	return b, "image/png", nil
}

func TestPhotosReachAVisionModel(t *testing.T) {
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"p1": pic.Bytes(), "huge": make([]byte, media.MaxFetchBytes+1)}
	for _, tc := range []struct {
		name, vision string
		files        []adapters.FileRef
		wantImages   int
		wantNotice   string
	}{
		{"vision", "true", []adapters.FileRef{{ID: "p1", Name: "cat.png", MediaType: "image/png"}}, 1, ""},
		{"text only", "false", []adapters.FileRef{{ID: "p1", MediaType: "image/png"}}, 0, "can't see images"},
		{"too large", "true", []adapters.FileRef{{ID: "huge", Name: "big.png", MediaType: "image/png"}}, 0, "big.png is over 20 MB"},
		{"ten", "true", func() []adapters.FileRef {
			var out []adapters.FileRef
			for range 10 {
				out = append(out, adapters.FileRef{ID: "p1", MediaType: "image/png"})
			}
			return out
		}(), 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path, _ := writeConfig(t, "gateway:\n  debounce: 0s\nagents:\n  - id: default\n    vision: "+tc.vision+"\n")
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rec := fetchingRecorder{adapterstest.New(), files}
			d, err := build(ctx, cfg, slog.New(slog.DiscardHandler), map[adapters.ID]adapters.Adapter{"tg": rec})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- d.Run(runCtx) }()
			defer func() { cancel(); <-done; d.Close() }()
			in := adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: "42", UserID: "7", MessageID: "m1",
				Text: "what is this?", Files: tc.files, Time: time.Now()}
			if err := d.gw.Deliver(ctx, in); err != nil {
				t.Fatal(err)
			}
			wctx, c := context.WithTimeout(ctx, 20*time.Second)
			defer c()
			sent, err := rec.WaitSent(wctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			reply := sent[0].Text
			reqs := d.offline.Requests()
			last := reqs[len(reqs)-1].Messages
			got := len(last[len(last)-1].Images)
			if got != tc.wantImages {
				t.Fatalf("the model got %d images, want %d (reply %q)", got, tc.wantImages, reply)
			}
			if tc.wantNotice != "" && !strings.Contains(reply, tc.wantNotice) {
				t.Fatalf("reply %q lacks %q", reply, tc.wantNotice)
			}
			if tc.wantNotice == "" && strings.HasPrefix(reply, "(") {
				t.Fatalf("an unexpected notice: %q", reply)
			}
		})
	}
}
