package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/telemetry"
)

// SenderOptions configure the outbox sender.
type SenderOptions struct {
	// Adapter finds the adapter a reply goes out through.
	Adapter func(adapters.ID) (adapters.Adapter, bool)
	Log     *slog.Logger
	// Backoff is the wait after the n-th failed attempt (n from 1). Default:
	// 1s doubling to 5m, with jitter.
	Backoff func(attempt int) time.Duration
	// MaxAttempts before a reply is given up and marked failed. Default 12.
	MaxAttempts int
	// Lease is how long a claimed reply is reserved for its sender; if the
	// sender dies, another takes it after this. Default 1m.
	Lease time.Duration
	// Poll is how often the outbox is checked without a Wake. Default 1s.
	Poll time.Duration
	// Parallel is how many chats are sent to at once. Default 16.
	Parallel int
	// OnSend, if set, hears of each platform call: the adapter, how long it
	// took and its error. OnRetry hears of each failed send put off for a
	// retry.
	OnSend  func(adapter adapters.ID, took time.Duration, err error)
	OnRetry func(adapter adapters.ID)
	// OnReclaim, if set, hears how many replies Run took back at its start
	// from a crashed earlier run (see Store.Reclaim): each may reach its
	// chat twice.
	OnReclaim func(n int)
	// Alive, if set, is asked before each platform call: a replica that
	// may have lost its claims (paused past its lease, say) sends
	// nothing; the replies go to whoever took them over. The time it
	// returns (zero for none) is when the lease ends: it becomes the
	// call's deadline, so a call the process was paused inside, past its
	// check, is still refused by the channel before it is written (see
	// adapters.GuardDeadline).
	Alive func() (until time.Time, err error)
	// Files reads the files replies carry from the session file store.
	Files FileSource
	// Speaker, if set, speaks the replies marked Speak (speech.Client);
	// without it they go as text.
	Speaker Speaker
}

// A Speaker synthesizes a reply's text as a voice note (Ogg Opus audio).
type Speaker interface {
	Synthesize(ctx context.Context, text string) (audio []byte, mediaType string, err error)
}

// FileSource is where the sender reads a file a reply carries
// (files.Store): its size first, to check the channel's limit, then its
// bytes.
type FileSource interface {
	Stat(ctx context.Context, id sessions.ID, name string) (files.File, error)
	Get(ctx context.Context, id sessions.ID, name string) (files.File, error)
}

// Sender sends the outbox: each reply once, a chat's replies in order, and
// one slow chat never holding up another. Several senders (replicas) may
// share one database; claims keep them from sending a reply twice.
type Sender struct {
	store *Store
	opts  SenderOptions
	caps  adapters.CapabilityCache
	wake  chan struct{}

	// unsettled are the outcomes of sends whose record failed (the
	// database out of reach), by reply id, each recorded when it
	// answers; lost says a claim may have committed unseen, or a claimed
	// reply was left unsent, since the last pass that settled. Either
	// way this sender's own claims are taken back then, so its chats go
	// on at once rather than when the claims lapse.
	mu        sync.Mutex
	unsettled map[string]func(ctx context.Context) error
	lost      bool
}

// NewSender returns a sender over store.
func NewSender(store *Store, opts SenderOptions) *Sender {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff == nil {
		opts.Backoff = defaultBackoff
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 12
	}
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	return &Sender{store: store, opts: opts, wake: make(chan struct{}, 1)}
}

// sendTimeout bounds one platform call.
const sendTimeout = 30 * time.Second

// platform is the context of a platform call, made now. It goes on when
// the sender stops (cutting a send off could leave a reply delivered but
// not recorded, sent twice), and ends after sendTimeout or, among
// replicas, when this replica's lease ends as it stands now: a call the
// process was paused inside is refused by the channel before it is
// written (adapters.GuardDeadline), the survivor that took the reply over
// having sent it.
func (s *Sender) platform(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, deadline := context.WithoutCancel(ctx), time.Now().Add(sendTimeout)
	if s.opts.Alive != nil {
		until, err := s.opts.Alive()
		switch {
		case err != nil:
			deadline = time.Now()
		case !until.IsZero() && until.Before(deadline):
			deadline = until
		}
		ctx = adapters.FenceWrites(ctx)
	}
	return context.WithDeadline(ctx, deadline)
}

func defaultBackoff(attempt int) time.Duration {
	d := time.Second << min(attempt-1, 9) // 1s .. 512s
	d = min(d, 5*time.Minute)
	return d/2 + rand.N(d/2+1)
}

// Wake asks the sender to look at the outbox now.
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends until ctx ends. It first takes back what a crashed earlier
// run of this process claimed, so those chats resume at once.
func (s *Sender) Run(ctx context.Context) error {
	if n, err := s.store.Reclaim(ctx); err != nil {
		s.opts.Log.WarnContext(ctx, "take back replies a crash left claimed; they are sent once their claim lapses", "error", err)
	} else if n > 0 {
		s.opts.Log.WarnContext(ctx, "took back replies whose send a crash interrupted; a chat may see one of them twice", "count", n)
		if s.opts.OnReclaim != nil {
			s.opts.OnReclaim(n)
		}
	}
	ticker := time.NewTicker(s.opts.Poll)
	defer ticker.Stop()
	woken := false
	var idle idleOutbox
	for {
		for {
			// Woken for a reply just queued, or right after a pass that
			// sent (a chat's next reply may be due), the sender claims
			// without looking first; on a poll it looks, so an idle
			// outbox costs a read, not a write.
			mark := s.store.db.Mark()
			claimed, n, err := s.sendDue(ctx, !woken)
			if err != nil && ctx.Err() == nil {
				s.opts.Log.WarnContext(ctx, "outbox pass failed", "error", err)
			}
			idle = s.noteIdle(ctx, mark, claimed == 0 && err == nil)
			if n == 0 || ctx.Err() != nil {
				break // nothing sent: wait
			}
			woken = true
		}
		woken = false
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
				woken = true
				break wait
			case <-ticker.C:
				if !idle.still(s.store.db, s.store.now()) {
					break wait
				}
			}
		}
	}
}

// idleOutbox is what a pass that found nothing due saw: the database's
// mark before it, and when the next pending reply comes due (zero: none
// is pending). On a SQLite file this process holds, a poll then looks at
// the outbox only if something was written since, or a retry or a lapsed
// claim has come due: an idle daemon leaves its database alone, and the
// code that reading it maps stays unmapped.
type idleOutbox struct {
	ok      bool // the pass found nothing due
	mark    dbutil.Mark
	nextDue time.Time
}

// still reports whether the outbox is as the pass saw it: nothing written
// since, and nothing come due.
func (i idleOutbox) still(db *dbutil.DB, now time.Time) bool {
	return i.ok && db.Unchanged(i.mark) && (i.nextDue.IsZero() || now.Before(i.nextDue))
}

// noteIdle records what a pass that began at mark saw, when it found
// nothing due (none is false otherwise).
func (s *Sender) noteIdle(ctx context.Context, mark dbutil.Mark, none bool) idleOutbox {
	if !none || mark == dbutil.NoMark {
		return idleOutbox{}
	}
	at, pending, err := s.store.NextDue(ctx)
	if err != nil {
		return idleOutbox{}
	}
	i := idleOutbox{ok: true, mark: mark}
	if pending {
		i.nextDue = at
	}
	return i
}

// SendDue makes one pass over the due replies and returns how many it sent.
// Parallel bounds the platform calls under way; recording an outcome
// doesn't hold a slot, so the records of a pass share commits.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	_, sent, err := s.sendDue(ctx, true)
	return sent, err
}

// sendDue is SendDue that also says how many replies it claimed.
func (s *Sender) sendDue(ctx context.Context, look bool) (claimed, sent int, err error) {
	if err := s.settle(ctx); err != nil {
		return 0, 0, err
	}
	due, err := s.store.claimDue(ctx, claimDueLimit, s.opts.Lease, look)
	if err != nil {
		// Its commit may have gone through unseen.
		s.loseClaims()
		return 0, 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, s.opts.Parallel)
	)
	for _, r := range due { // at most one per chat
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := s.send(ctx, r, func() { <-sem })
			mu.Lock()
			defer mu.Unlock()
			if done {
				sent++
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return len(due), sent, errors.Join(errs...)
}

// loseClaims notes that this sender may hold claims it doesn't know of.
func (s *Sender) loseClaims() {
	s.mu.Lock()
	s.lost = true
	s.mu.Unlock()
}

// unsettle keeps a send's outcome whose record failed, to record it
// once the database answers.
func (s *Sender) unsettle(id string, record func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsettled == nil {
		s.unsettled = map[string]func(context.Context) error{}
	}
	s.unsettled[id] = record
}

// settle records the outcomes whose record failed, then takes back this
// sender's other claims (none is in flight between passes): a claim the
// database took unseen, a reply left unsent. It fails while the database
// is still out of reach.
func (s *Sender) settle(ctx context.Context) error {
	s.mu.Lock()
	lost, pending := s.lost, len(s.unsettled)
	records := make(map[string]func(context.Context) error, pending)
	for id, rec := range s.unsettled {
		records[id] = rec
	}
	s.mu.Unlock()
	if !lost && pending == 0 {
		return nil
	}
	for id, record := range records {
		if err := record(ctx); dbutil.Unavailable(err) {
			return fmt.Errorf("record a reply's outcome the database missed: %w", err)
		} else if err != nil {
			s.opts.Log.ErrorContext(ctx, "record a reply's outcome the database missed; the reply is claimed again when its claim lapses", "reply_id", id, "error", err)
		}
		s.mu.Lock()
		delete(s.unsettled, id)
		s.mu.Unlock()
	}
	n, err := s.store.ReclaimOwn(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.lost = false
	s.mu.Unlock()
	if len(records) > 0 || n > 0 {
		s.opts.Log.InfoContext(ctx, "the database answers again: replies whose record it missed are recorded, and the claims it kept are taken back", "recorded", len(records), "taken_back", n)
	}
	return nil
}

// deliverReply sends r, or makes it the final edit of the streamed message
// it finishes. If that message can't be edited (deleted, say), the text goes
// out as a new message: it must arrive.
func (s *Sender) deliverReply(ctx context.Context, a adapters.Adapter, r Reply) (adapters.Sent, error) {
	if r.FileName != "" {
		return s.deliverFile(ctx, a, r)
	}
	if r.Speak {
		return s.deliverVoice(ctx, a, r)
	}
	if ed := s.caps.Of(r.Adapter, a).Edit; ed != nil && r.EditMessageID != "" {
		err := ed.Edit(ctx, r.ChatID, r.EditMessageID, r.Text)
		if err == nil {
			return adapters.Sent{MessageID: r.EditMessageID}, nil
		}
		var rl *adapters.RateLimitError
		if errors.As(err, &rl) || ctx.Err() != nil {
			return adapters.Sent{}, err
		}
	}
	return a.Send(ctx, adapters.Outbound{Adapter: r.Adapter, ChatID: r.ChatID, Text: r.Text, ReplyTo: r.ReplyTo, IdempotencyKey: r.Key})
}

// send delivers one claimed reply and records the outcome; it calls
// called once the platform call is over.
func (s *Sender) send(ctx context.Context, r Reply, called func()) (bool, error) {
	attempt := r.Attempts + 1 // the claim counted this one
	// Under the span of the turn that queued it, while tracing is on.
	ctx, span := telemetry.Start(telemetry.Recall(ctx, r.InboundID), telemetry.SpanOutboxSend, telemetry.KindClient)
	defer span.End()
	span.Str(telemetry.AttrChannel, string(r.Adapter))
	span.Int("parley.outbox.attempt", int64(attempt))
	if s.opts.Alive != nil {
		if _, err := s.opts.Alive(); err != nil {
			called()
			// Claimed, and left unsent: taken back once this replica
			// renews its lease (or by whoever fences it).
			s.loseClaims()
			return false, err
		}
	}
	a, ok := s.opts.Adapter(r.Adapter)
	var sent adapters.Sent
	var err error
	if !ok {
		err = fmt.Errorf("adapter %s is not configured; add it back to the config or the reply stays unsent", r.Adapter)
	} else {
		sendCtx, cancel := s.platform(ctx)
		start := time.Now()
		sent, err = s.deliverReply(sendCtx, a, r)
		cancel()
		span.Fail(err)
		if s.opts.OnSend != nil {
			s.opts.OnSend(r.Adapter, time.Since(start), err)
		}
		if s.opts.Alive != nil && errors.Is(err, adapters.ErrDeadlinePassed) {
			// Refused before a byte was written, the lease over (the
			// process paused past its check, say): as if Alive had said
			// no.
			called()
			s.loseClaims()
			return false, err
		}
	}
	called()
	// Record the outcome even when ctx is ending: a sent reply must be marked.
	rec := context.WithoutCancel(ctx)
	if err == nil {
		if merr := s.store.MarkSent(rec, r.ID, sent.MessageID); merr != nil {
			s.unsettle(r.ID, func(ctx context.Context) error { return s.store.MarkSent(ctx, r.ID, sent.MessageID) })
			return true, merr
		}
		return true, nil
	}
	wait := s.opts.Backoff(attempt)
	var rl *adapters.RateLimitError
	if errors.As(err, &rl) && rl.RetryAfter > wait {
		wait = rl.RetryAfter
	}
	giveUp := attempt >= s.opts.MaxAttempts || errors.Is(err, adapters.ErrUndeliverable)
	if giveUp {
		s.opts.Log.ErrorContext(ctx, "reply given up", "adapter", r.Adapter, "chat_id", r.ChatID, "reply", r.Key, "attempts", attempt, "error", err)
	} else {
		s.opts.Log.WarnContext(ctx, "reply send failed; will retry", "adapter", r.Adapter, "chat_id", r.ChatID, "reply", r.Key, "attempt", attempt, "retry_in", wait, "error", err)
	}
	if !giveUp && s.opts.OnRetry != nil {
		s.opts.OnRetry(r.Adapter)
	}
	next := s.store.now().Add(wait)
	if merr := s.store.MarkRetry(rec, r.ID, err, next, giveUp); merr != nil {
		s.unsettle(r.ID, func(ctx context.Context) error { return s.store.MarkRetry(ctx, r.ID, err, next, giveUp) })
		return false, merr
	}
	return false, nil
}

// deliverVoice speaks r's text and sends it as a voice note. It is
// synthesized now, at each try, so a crash before the send leaves nothing
// half done: the next try speaks it again and sends it once. When it
// can't be spoken (no speaker, a channel without voice notes, a failed
// synthesis), the text goes instead, unless the reply's text went
// already beside it (VoiceWithText).
func (s *Sender) deliverVoice(ctx context.Context, a adapters.Adapter, r Reply) (adapters.Sent, error) {
	caps := s.caps.Of(r.Adapter, a)
	text := func(why string, err error) (adapters.Sent, error) {
		s.opts.Log.WarnContext(ctx, "a spoken reply goes as text", "adapter", r.Adapter, "chat_id", r.ChatID, "reply", r.Key, "reason", why, "error", err)
		if VoiceWithText(r.Text, caps.MaxMessageLength) {
			return adapters.Sent{}, nil // its text was queued beside it
		}
		return a.Send(ctx, adapters.Outbound{Adapter: r.Adapter, ChatID: r.ChatID, Text: r.Text, ReplyTo: r.ReplyTo, IdempotencyKey: r.Key})
	}
	if s.opts.Speaker == nil || caps.Files == nil {
		return text("no speech provider, or a channel without voice notes", nil)
	}
	// Synthesis is not bounded by the lease, which may end while it runs
	// and be renewed: the call that sends its audio is, as it begins.
	synth, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	audio, typ, err := s.opts.Speaker.Synthesize(synth, SpeakableText(r.Text))
	cancel()
	if err != nil {
		if synth.Err() != nil {
			return adapters.Sent{}, err // out of time: try again
		}
		return text("synthesis failed", err)
	}
	ctx, cancel = s.platform(ctx)
	defer cancel()
	if max := caps.Files.MaxFileBytes(); max > 0 && int64(len(audio)) > max {
		return text("the spoken reply is over the channel's file limit", nil)
	}
	return caps.Files.SendFile(ctx, adapters.Outbound{Adapter: r.Adapter, ChatID: r.ChatID, ReplyTo: r.ReplyTo, IdempotencyKey: r.Key,
		File: &adapters.File{Name: "reply.ogg", MediaType: typ, Data: audio, Voice: true}})
}

// VoiceWithText says whether a spoken reply also goes as text: when it is
// long (over 600 characters, or more than one message of the channel's,
// limit 0 meaning none) or holds code, which nobody wants read aloud.
func VoiceWithText(text string, limit int) bool {
	n := utf8.RuneCountInString(text)
	return n > maxSpokenRunes || limit > 0 && n > limit || strings.Contains(text, "```")
}

// maxSpokenRunes is the longest reply spoken without its text beside it:
// about 40 seconds of speech.
const maxSpokenRunes = 600

// SpeakableText is a reply as it is read aloud: without code blocks (said
// to be in the message) and Markdown's marks.
func SpeakableText(text string) string {
	var b strings.Builder
	parts := strings.Split(text, "```")
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString(" (the code is in the message) ")
			continue
		}
		b.WriteString(p)
	}
	out := strings.NewReplacer("**", "", "__", "", "`", "", "#", "").Replace(b.String())
	return strings.Join(strings.Fields(out), " ")
}

// deliverFile sends the file r names, read from the file store now. What
// can't go (a channel without files, a file over the channel's limit, a
// file deleted since) is said in the chat instead, so the person knows.
func (s *Sender) deliverFile(ctx context.Context, a adapters.Adapter, r Reply) (adapters.Sent, error) {
	say := func(text string) (adapters.Sent, error) {
		return a.Send(ctx, adapters.Outbound{Adapter: r.Adapter, ChatID: r.ChatID, Text: text, ReplyTo: r.ReplyTo, IdempotencyKey: r.Key})
	}
	if s.opts.Files == nil {
		return adapters.Sent{}, fmt.Errorf("send file %s: this sender has no file store", r.FileName)
	}
	id := sessions.ID(r.FileSession)
	st, err := s.opts.Files.Stat(ctx, id, r.FileName)
	if errors.Is(err, files.ErrNotFound) || errors.Is(err, files.ErrInvalidName) {
		return say(fmt.Sprintf("I meant to send you %s, but it was deleted before it could be sent.", r.FileName))
	}
	if err != nil {
		return adapters.Sent{}, err
	}
	fs := s.caps.Of(r.Adapter, a).Files
	if fs == nil {
		return say(strings.TrimSpace(fmt.Sprintf("I have %s (%s) for you, but files can't be sent on this channel. %s",
			r.FileName, sessions.ByteSize(st.Size), r.Text)))
	}
	if max := fs.MaxFileBytes(); max > 0 && st.Size > max {
		return say(fmt.Sprintf("I can't send %s here: it is %s, and this channel takes files of at most %s.",
			r.FileName, sessions.ByteSize(st.Size), sessions.ByteSize(max)))
	}
	f, err := s.opts.Files.Get(ctx, id, r.FileName)
	if errors.Is(err, files.ErrNotFound) {
		return say(fmt.Sprintf("I meant to send you %s, but it was deleted before it could be sent.", r.FileName))
	}
	if err != nil {
		return adapters.Sent{}, err
	}
	return fs.SendFile(ctx, adapters.Outbound{Adapter: r.Adapter, ChatID: r.ChatID, Text: r.Text, ReplyTo: r.ReplyTo, IdempotencyKey: r.Key,
		File: &adapters.File{Name: f.Name, MediaType: f.MediaType, Data: f.Data}})
}
