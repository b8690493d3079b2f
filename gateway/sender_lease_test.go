package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// pausedPoster is a channel whose process is paused (SIGSTOP, a frozen VM)
// after the sender's lease check and before its request is written; on
// waking it posts the reply to the platform with the context the sender
// gave it, through the guard every HTTP channel uses.
type pausedPoster struct {
	url    string
	client *http.Client
	pause  atomic.Pointer[time.Duration]
}

func (p *pausedPoster) Start(ctx context.Context, sink adapters.Sink) error {
	<-ctx.Done()
	return nil
}

func (p *pausedPoster) Send(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if d := p.pause.Swap(nil); d != nil {
		time.Sleep(*d)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, strings.NewReader(out.Text))
	if err != nil {
		return adapters.Sent{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return adapters.Sent{}, err
	}
	resp.Body.Close()
	return adapters.Sent{MessageID: "m"}, nil
}

// A reply whose send began under the replica's lease, and whose process
// was paused past the lease's end before the request went out, never
// reaches the platform late (by then a survivor has sent it, and the
// replies after it): the lease's end is the call's deadline. The claim is
// taken back, and once the lease is renewed the reply goes out, once.
func TestSendPausedPastTheLeaseIsNotWrittenLate(t *testing.T) {
	for _, engine := range dbtest.Engines() {
		t.Run(engine.Name, func(t *testing.T) {
			if engine.Name == "postgres" {
				dbtest.RequirePostgres(t)
			}
			testSendPausedPastTheLease(t, engine.Name)
		})
	}
}

func testSendPausedPastTheLease(t *testing.T, engine string) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	platform := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer platform.Close()
	ch := &pausedPoster{url: platform.URL, client: &http.Client{Transport: adapters.GuardDeadline(http.DefaultTransport)}}
	pause := 300 * time.Millisecond
	ch.pause.Store(&pause)

	db, _ := outageDB(t, engine)
	store := gateway.NewStore(db, time.Now)
	var leaseEnds atomic.Pointer[time.Time]
	s := senderFor(store, ch, gateway.SenderOptions{Lease: time.Minute, Alive: func() (time.Time, error) {
		return *leaseEnds.Load(), nil
	}})
	end := time.Now().Add(100 * time.Millisecond) // passes during the pause
	leaseEnds.Store(&end)
	if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "a:1", Adapter: "tg", ChatID: "1", Text: "reply 1"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.SendDue(ctx); n != 0 {
		t.Fatalf("a send paused past the lease's end counted %d sent", n)
	}
	mu.Lock()
	late := append([]string(nil), got...)
	mu.Unlock()
	if len(late) != 0 {
		t.Fatalf("the platform received %q after the replica's lease had ended; want nothing", late)
	}

	renewed := time.Now().Add(time.Minute)
	leaseEnds.Store(&renewed)
	if n, err := s.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("the pass after the lease was renewed sent %d (%v); want the reply at once", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "reply 1" {
		t.Fatalf("the platform received %q; want reply 1, once", got)
	}
}

// voiceChannel takes voice notes.
type voiceChannel struct {
	pausedPoster
	mu    sync.Mutex
	files []adapters.Outbound
}

func (v *voiceChannel) SendFile(ctx context.Context, out adapters.Outbound) (adapters.Sent, error) {
	if err := ctx.Err(); err != nil {
		return adapters.Sent{}, err
	}
	v.mu.Lock()
	v.files = append(v.files, out)
	v.mu.Unlock()
	return adapters.Sent{MessageID: "v"}, nil
}

func (v *voiceChannel) MaxFileBytes() int64 { return 1 << 20 }

// slowSpeaker takes longer than what is left of a lease to synthesize.
type slowSpeaker struct{ took time.Duration }

func (s slowSpeaker) Synthesize(ctx context.Context, text string) ([]byte, string, error) {
	select {
	case <-time.After(s.took):
		return []byte("OggS" + text), "audio/ogg", nil
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// Among replicas, a spoken reply's synthesis may outlast what was left of
// the lease when its send began while the lease is renewed meanwhile: the
// voice note goes, once, bounded by the lease as it stands when it is sent.
func TestSpokenReplyOutlastingTheLeaseIsSent(t *testing.T) {
	ctx := context.Background()
	ch := &voiceChannel{}
	db, _ := outageDB(t, "sqlite")
	store := gateway.NewStore(db, time.Now)
	s := senderFor(store, ch, gateway.SenderOptions{Lease: time.Minute, Speaker: slowSpeaker{took: 300 * time.Millisecond},
		Alive: func() (time.Time, error) { return time.Now().Add(100 * time.Millisecond), nil }}) // renewed all along
	if err := store.QueueReplies(ctx, []gateway.Reply{{Key: "a:1", Adapter: "tg", ChatID: "1", Text: "spoken reply", Speak: true}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SendDue(ctx); err != nil || n != 1 {
		t.Fatalf("sent %d (%v); want the voice note", n, err)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.files) != 1 || ch.files[0].File == nil || !ch.files[0].File.Voice || string(ch.files[0].File.Data) != "OggSspoken reply" {
		t.Fatalf("the channel got %+v; want one voice note", ch.files)
	}
}
