package gateway

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
)

// streamEvery is the least time between two edits of a streamed reply;
// platforms rate-limit edits, and a reader gains nothing from faster ones.
const streamEvery = time.Second

// streamer shows a reply as it is written, on a channel that can edit
// messages: the first text is sent as a message, which is then edited at
// most once a second. The final text is not its job: it goes through the
// outbox as the last edit, so it is delivered once and durably.
type streamer struct {
	ad      adapters.Adapter
	ed      adapters.Editor
	chatID  string
	replyTo string
	limit   int
	every   time.Duration // least time between two updates
	log     func(msg string, args ...any)

	mu     sync.Mutex
	text   []byte
	shown  int // len(text) when last shown
	msgID  string
	failed bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// startStream starts streaming the reply to in, or returns nil when its
// channel doesn't stream.
func (g *Gateway) startStream(ctx context.Context, in adapters.Inbound) *streamer {
	if !g.opts.Channels.Streams(in.Adapter) {
		return nil
	}
	ad, ok := g.opts.Channels.Adapter(in.Adapter)
	if !ok {
		return nil
	}
	caps := g.capabilities(in.Adapter)
	ed := caps.Edit
	if ed == nil {
		return nil
	}
	limit := caps.MaxMessageLength
	every := streamEvery
	if caps.StreamEvery > 0 {
		every = caps.StreamEvery
	}
	s := &streamer{ad: ad, ed: ed, chatID: in.ChatID, replyTo: in.MessageID, limit: limit, every: every,
		log:  func(msg string, args ...any) { g.opts.Log.DebugContext(ctx, msg, args...) },
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(context.WithoutCancel(ctx))
	return s
}

// add takes the next piece of the reply. It never blocks on the network.
func (s *streamer) add(delta string) {
	s.mu.Lock()
	s.text = append(s.text, delta...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// finish stops streaming, waits for an edit under way, and returns the id
// of the message shown, if any: the final text edits it.
func (s *streamer) finish() string {
	if s == nil {
		return ""
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgID
}

func (s *streamer) run(ctx context.Context) {
	defer close(s.done)
	var last time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		if wait := s.every - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-s.stop:
				return
			case <-time.After(wait):
			}
		}
		s.mu.Lock()
		if s.failed || len(s.text) == s.shown {
			s.mu.Unlock()
			continue
		}
		text := string(s.text)
		s.shown, last = len(s.text), time.Now()
		id := s.msgID
		s.mu.Unlock()
		if s.limit > 0 && utf8.RuneCountInString(text)+2 > s.limit {
			s.setFailed() // past one message: the final reply is chunked as usual
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, sendTimeout)
		var err error
		if id == "" {
			var sent adapters.Sent
			sent, err = s.ad.Send(cctx, adapters.Outbound{ChatID: s.chatID, Text: text + adapters.StreamingMark, ReplyTo: s.replyTo})
			if err == nil {
				s.mu.Lock()
				s.msgID = sent.MessageID
				s.mu.Unlock()
			}
		} else {
			err = s.ed.Edit(cctx, s.chatID, id, text+adapters.StreamingMark)
		}
		cancel()
		if err != nil {
			s.log("streaming a reply stopped; it is sent whole at the end", "chat_id", s.chatID, "error", err)
			s.setFailed()
		}
	}
}

func (s *streamer) setFailed() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}
