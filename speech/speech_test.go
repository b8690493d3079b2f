package speech_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/speech"
	"github.com/parleyd/parley/speech/speechtest"
)

func TestTranscribeAndSynthesize(t *testing.T) {
	ctx := context.Background()
	srv := speechtest.New(t)
	srv.Transcripts["voice-1"] = " hello there "
	c := speech.New(speech.Options{BaseURL: srv.BaseURL(), APIKey: "sk-secret", Language: "en"})
	text, err := c.Transcribe(ctx, []byte("voice-1"), "voice.ogg", "audio/ogg")
	if err != nil || text != "hello there" {
		t.Fatalf("Transcribe = %q, %v; want %q", text, err, "hello there")
	}
	if got := srv.Authorized(); len(got) != 1 || got[0] != "Bearer sk-secret" {
		t.Fatalf("authorization %q", got)
	}
	audio, typ, err := c.Synthesize(ctx, "a reply")
	if err != nil || string(audio) != string(srv.Audio) || typ != "audio/ogg" {
		t.Fatalf("Synthesize = %q %q %v", audio, typ, err)
	}
	if got := srv.Spoken(); len(got) != 1 || got[0] != "a reply" {
		t.Fatalf("spoken %q", got)
	}
}

func TestTranscribeFailures(t *testing.T) {
	ctx := context.Background()
	srv := speechtest.New(t)
	c := speech.New(speech.Options{BaseURL: srv.BaseURL(), APIKey: "sk-secret", MaxBytes: 10})
	if _, err := c.Transcribe(ctx, []byte("unknown"), "v.ogg", "audio/ogg"); !errors.Is(err, speech.ErrRefused) {
		t.Fatalf("undecodable audio: %v, want ErrRefused", err)
	}
	if _, err := c.Transcribe(ctx, []byte("much too long audio"), "v.ogg", "audio/ogg"); !errors.Is(err, speech.ErrTooLarge) || !strings.Contains(err.Error(), "speech.max_bytes") {
		t.Fatalf("oversized audio: %v, want ErrTooLarge naming speech.max_bytes", err)
	}
	srv.Fail = http.StatusServiceUnavailable
	_, err := c.Transcribe(ctx, []byte("x"), "v.ogg", "audio/ogg")
	if !errors.Is(err, speech.ErrUnavailable) || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("server failure: %v, want ErrUnavailable without the key", err)
	}
	slow := speechtest.New(t)
	block := make(chan struct{})
	defer close(block)
	slow.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block })
	c = speech.New(speech.Options{BaseURL: slow.BaseURL(), Timeout: 50 * time.Millisecond})
	if _, err := c.Transcribe(ctx, []byte("x"), "v.ogg", "audio/ogg"); !errors.Is(err, speech.ErrUnavailable) || !strings.Contains(err.Error(), "speech.timeout") {
		t.Fatalf("a server that never answers: %v, want ErrUnavailable naming speech.timeout", err)
	}
}

// Voice notes transcribed together reuse the client's connections to the
// speech server, wave after wave, rather than opening one per call beyond
// net/http's two kept per host.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	ctx := context.Background()
	srv := speechtest.New(t)
	srv.Transcripts["voice"] = "hello"
	c := speech.New(speech.Options{BaseURL: srv.BaseURL()})
	const waves, together = 5, 16
	for range waves {
		var wg sync.WaitGroup
		errs := make(chan error, together)
		for range together {
			wg.Go(func() {
				if _, err := c.Transcribe(ctx, []byte("voice"), "voice.ogg", "audio/ogg"); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// The first wave opens up to one each; later waves find them idle
	// (allowing for a few not yet back when the next wave began).
	if n := srv.Connections(); n > 2*together {
		t.Fatalf("%d connections for %d waves of %d calls at once, want at most %d", n, waves, together, 2*together)
	}
}
