// Package discord is the Discord channel: a bot on Discord's gateway
// (github.com/bwmarrin/discordgo) that takes direct messages, guild
// channel messages and thread messages, and answers over the REST API.
//
// Each channel id is a conversation (ChatID): a DM channel, a guild
// channel, or a thread. A guild message mentions the bot when it pings
// the bot or replies to one of the bot's messages.
package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/sleep"
	"github.com/parleyd/parley/secret"
)

func init() { adapters.Register("discord", New) }

// MaxMessageLength is Discord's limit on a message's content.
const MaxMessageLength = 2000

// Intents are what the bot asks the gateway for: messages in guild
// channels and threads, direct messages, and their content, and the
// guilds themselves (whose roles say which one is the bot's). Message
// content is a privileged intent: turn it on in the developer portal
// (your application → Bot → Message Content Intent), or Discord refuses
// the connection (close code 4014).
const Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages |
	discordgo.IntentsMessageContent

// Adapter is one Discord bot.
type Adapter struct {
	id    adapters.ID
	log   *slog.Logger
	token secret.String // set.Token, for redacting
	set   settings
	s     *discordgo.Session
	tr    *transport
	files *http.Client // attachment downloads

	started atomic.Bool
	state   atomic.Pointer[string] // for Health
	botID   atomic.Pointer[string]
	// botRoles maps a guild id to the bot's own role there (the one
	// Discord made for it), which people mention to address the bot too.
	botRoles sync.Map
	lost     chan struct{} // a gateway connection ended

	// deliverBackoff is the wait before delivery attempt n+1 after n
	// failures; connectBackoff the same for gateway connections.
	deliverBackoff func(n int) time.Duration
	connectBackoff func(n int) time.Duration
	// settle is how long the session must stay quiet after a lost
	// connection before it is opened again (see run).
	settle time.Duration

	mu    sync.Mutex
	lanes map[string][]adapters.Inbound // undelivered messages per chat, in order
	wg    sync.WaitGroup                // the lanes' goroutines
}

var (
	_ adapters.Adapter = (*Adapter)(nil)
	_ adapters.Limiter = (*Adapter)(nil)
	_ adapters.Editor  = (*Adapter)(nil)
	_ adapters.Typer   = (*Adapter)(nil)
)

// New builds a Discord adapter from its config section. An empty token
// gives adapters.ErrNoCredentials. It makes no network calls.
func New(id adapters.ID, decode adapters.Decoder, deps adapters.Deps) (adapters.Adapter, error) {
	set, err := parseConfig(decode)
	if err != nil {
		return nil, err
	}
	log := deps.Logger()
	a := &Adapter{
		id:             id,
		log:            log.With("adapter", string(id)),
		token:          set.Token,
		set:            set,
		tr:             newTransport(set),
		lost:           make(chan struct{}, 1),
		deliverBackoff: backoff(250*time.Millisecond, 30*time.Second),
		settle:         500 * time.Millisecond,
		connectBackoff: backoff(time.Second, 2*time.Minute),
		lanes:          map[string][]adapters.Inbound{},
	}
	// Send, Edit and Typing go through this session, which never opens a
	// gateway connection; Start opens one of its own (newGateway).
	if a.s, err = a.newSession(); err != nil {
		return nil, err
	}
	a.files = a.newFileClient()
	a.setState(stateNotStarted)
	return a, nil
}

// newSession makes a discordgo session with parley's settings.
func (a *Adapter) newSession() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + a.set.Token.Reveal())
	if err != nil {
		return nil, fmt.Errorf("discord session: %w", redact(err, a.token))
	}
	s.Client = &http.Client{Timeout: 30 * time.Second, Transport: a.tr}
	s.Identify.Intents = Intents
	s.ShardID, s.ShardCount = a.set.shardID, a.set.shardCount
	if a.set.shardCount > 1 {
		s.Identify.Shard = &[2]int{a.set.shardID, a.set.shardCount}
	}
	// Reconnecting is ours (run), so it follows ctx and stops at shutdown;
	// discordgo's own loop runs on after Close and can reopen the socket.
	s.ShouldReconnectOnError = false
	// A 429 goes back to the caller as adapters.RateLimitError, so the
	// outbox waits and retries; discordgo would sleep and retry inside Send.
	s.ShouldRetryOnRateLimit = false
	// A 502 is retried by the outbox too, with the same nonce.
	s.MaxRestRetries = 0
	// Handlers run in the read loop, one at a time, so messages are taken
	// in the order Discord sent them. Ours only queue.
	s.SyncEvents = true
	s.StateEnabled = false
	// discordgo logs through the standard logger; it is silenced, and
	// what matters is logged here (its debug level prints the token).
	s.LogLevel = -1
	return s, nil
}

// backoff doubles from first up to max, with up to 20% jitter.
func backoff(first, max time.Duration) func(n int) time.Duration {
	wait := adapters.Backoff(first, max)
	return func(n int) time.Duration {
		d := wait(n)
		return d + time.Duration(rand.Int64N(int64(d)/5+1))
	}
}

// String names the adapter; printing it never shows the token, which fmt
// would print from its unexported fields.
func (a *Adapter) String() string { return "discord adapter " + string(a.id) }

// GoString is String, for %#v.
func (a *Adapter) GoString() string { return a.String() }

// Connection states, for Health.
const (
	stateNotStarted   = "not started"
	stateStopped      = "stopped"
	stateConnecting   = "connecting"
	stateConnected    = "connected"
	stateReconnecting = "reconnecting"
)

func (a *Adapter) setState(s string) { a.state.Store(&s) }

// Health reports whether the gateway connection is up, and its state:
// "connected", "connecting", "reconnecting", "not started", "stopped", or
// why Discord refused the bot. Sends work over REST whatever it says.
func (a *Adapter) Health() (ok bool, detail string) {
	s := *a.state.Load()
	return s == stateConnected, s
}

// MaxMessageLength implements adapters.Limiter.
func (a *Adapter) MaxMessageLength() int { return MaxMessageLength }

// Start connects to the gateway and delivers messages to sink until ctx
// ends, reconnecting (and resuming the session) whenever the connection
// drops. It returns nil when ctx ends, and an error only when Discord
// refuses the bot for good: a bad token, or intents it may not have.
func (a *Adapter) Start(ctx context.Context, sink adapters.Sink) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("discord: Start called twice")
	}
	a.tr.setRunContext(ctx)
	d := newDialer(ctx)
	a.setState(stateConnecting)
	err := a.run(ctx, sink, d)
	if err != nil {
		a.setState("refused: " + err.Error())
	} else {
		a.setState(stateStopped)
	}
	d.closeAll()
	a.wg.Wait()
	return err
}

// gateway is one discordgo session's gateway connection: its id (session
// id and sequence number) is what a resume continues.
type gateway struct {
	s      *discordgo.Session
	remove []func()
}

// newGateway makes a session for the gateway, with parley's handlers.
func (a *Adapter) newGateway(ctx context.Context, sink adapters.Sink, d *dialer) (*gateway, error) {
	s, err := a.newSession()
	if err != nil {
		return nil, err
	}
	s.Dialer = &websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		NetDialContext:   d.dial,
		HandshakeTimeout: 30 * time.Second,
	}
	g := &gateway{s: s}
	g.remove = []func(){
		s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { a.onReady(r) }),
		s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Resumed) {
			a.log.InfoContext(ctx, "discord gateway session resumed")
		}),
		s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
			select {
			case a.lost <- struct{}{}:
			default:
			}
		}),
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { a.onMessage(ctx, sink, m.Message) }),
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageUpdate) { a.onEdit(ctx, sink, m.Message) }),
		s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { a.onInteraction(ctx, sink, i) }),
		s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) { a.onGuildEvent(e) }),
	}
	return g, nil
}

// close ends the connection: discordgo sends a close frame, waits a
// second, and closes. The handlers go first, so this close is not taken
// for a lost connection.
func (g *gateway) close(a *Adapter) {
	for _, remove := range g.remove {
		remove()
	}
	g.remove = nil
	if err := g.s.Close(); err != nil {
		a.log.Debug("discord gateway close", "error", redact(err, a.token))
	}
}

// run keeps a gateway connection open until ctx ends.
func (a *Adapter) run(ctx context.Context, sink adapters.Sink, d *dialer) error {
	g, err := a.newGateway(ctx, sink, d)
	if err != nil {
		return err
	}
	defer func() { g.close(a) }()
	failures := 0
	for {
		if ctx.Err() != nil {
			return nil
		}
		stop := context.AfterFunc(ctx, d.closeAll) // Open takes no context
		err := g.s.Open()
		stop()
		switch {
		case err == nil || errors.Is(err, discordgo.ErrWSAlreadyOpen):
			failures = 0
			a.setState(stateConnected)
			select {
			case <-ctx.Done():
				return nil
			case <-a.lost:
				if ctx.Err() == nil {
					a.setState(stateReconnecting)
					a.log.WarnContext(ctx, "discord gateway connection lost; reconnecting")
				}
			}
			a.awaitQuiet(ctx)
			continue
		case ctx.Err() != nil:
			return nil
		}
		if ferr := fatal(err); ferr != nil {
			a.log.ErrorContext(ctx, "discord gateway refused the bot", "error", ferr)
			return ferr
		}
		if sessionGone(err) {
			// discordgo would resume the dead session forever: start anew,
			// and identify on the next try.
			a.log.WarnContext(ctx, "discord gateway session can't be resumed; identifying anew", "error", redact(err, a.token))
			fresh, nerr := a.newGateway(ctx, sink, d)
			if nerr != nil {
				return nerr
			}
			g.close(a)
			g = fresh
		}
		failures++
		wait := a.connectBackoff(failures)
		a.log.WarnContext(ctx, "discord gateway connect failed; will retry", "attempt", failures, "retry_in", wait, "error", redact(err, a.token))
		if sleep.For(ctx, wait) != nil {
			return nil
		}
	}
}

// awaitQuiet waits until the lost connection's goroutines are done with
// the session: no disconnect for a.settle. discordgo's heartbeat goroutine
// can fail on the closed socket after the read loop closed it, and then
// closes whatever socket the session has by then; opened at once, the new
// connection was closed by the old one's goroutine, whose own heartbeat
// then closed the next, once a second, for good.
func (a *Adapter) awaitQuiet(ctx context.Context) {
	t := time.NewTimer(a.settle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.lost:
			t.Reset(a.settle)
		case <-t.C:
			return
		}
	}
}

func (a *Adapter) onReady(r *discordgo.Ready) {
	if r.User == nil {
		return
	}
	id := r.User.ID
	a.botID.Store(&id)
	a.log.Info("discord gateway connected", "bot_user_id", id, "bot_username", r.User.Username,
		"shard_id", a.set.shardID, "shard_count", a.set.shardCount)
}

// roleData is a role as the gateway sends it, with the tags discordgo's
// Role leaves out.
type roleData struct {
	ID   string `json:"id"`
	Tags struct {
		BotID string `json:"bot_id"`
	} `json:"tags"`
}

// onGuildEvent notes the bot's own role in each guild, from GUILD_CREATE
// and role changes.
func (a *Adapter) onGuildEvent(e *discordgo.Event) {
	var guild string
	var roles []roleData
	switch e.Type {
	case "GUILD_CREATE":
		var g struct {
			ID    string     `json:"id"`
			Roles []roleData `json:"roles"`
		}
		if json.Unmarshal(e.RawData, &g) != nil {
			return
		}
		guild, roles = g.ID, g.Roles
	case "GUILD_ROLE_CREATE", "GUILD_ROLE_UPDATE":
		var r struct {
			GuildID string   `json:"guild_id"`
			Role    roleData `json:"role"`
		}
		if json.Unmarshal(e.RawData, &r) != nil {
			return
		}
		guild, roles = r.GuildID, []roleData{r.Role}
	default:
		return
	}
	me := a.me()
	for _, r := range roles {
		if guild != "" && me != "" && r.ID != "" && r.Tags.BotID == me {
			a.botRoles.Store(guild, r.ID)
		}
	}
}

// botRole is the bot's own role in guild, "" if unknown.
func (a *Adapter) botRole(guild string) string {
	if r, ok := a.botRoles.Load(guild); ok {
		return r.(string)
	}
	return ""
}

func (a *Adapter) me() string {
	if p := a.botID.Load(); p != nil {
		return *p
	}
	return ""
}

// onEdit queues an edited message (MESSAGE_UPDATE with an edit time; an
// update that only adds an embed has none) as a message of its own, naming
// the one it edits.
func (a *Adapter) onEdit(ctx context.Context, sink adapters.Sink, m *discordgo.Message) {
	if m == nil || m.EditedTimestamp == nil {
		return
	}
	in, ok := toInbound(a.id, a.me(), a.botRole(m.GuildID), m)
	if !ok {
		return
	}
	in.Edits = in.MessageID
	in.MessageID += ":edit:" + strconv.FormatInt(m.EditedTimestamp.UnixMilli(), 10)
	a.enqueue(ctx, sink, in)
}

// onMessage queues a message on its chat's lane; it runs in discordgo's
// read loop, so it must not wait.
func (a *Adapter) onMessage(ctx context.Context, sink adapters.Sink, m *discordgo.Message) {
	in, ok := toInbound(a.id, a.me(), a.botRole(m.GuildID), m)
	if !ok {
		return
	}
	a.enqueue(ctx, sink, in)
}

// enqueue queues in on its chat's lane, without waiting.
func (a *Adapter) enqueue(ctx context.Context, sink adapters.Sink, in adapters.Inbound) {
	if err := in.Validate(); err != nil {
		a.log.WarnContext(ctx, "discord message refused", "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		a.log.ErrorContext(ctx, "discord message arrived at shutdown; not delivered", "chat_id", in.ChatID, "message_id", in.MessageID)
		return
	}
	q, running := a.lanes[in.ChatID]
	a.lanes[in.ChatID] = append(q, in)
	if n := len(q) + 1; n%100 == 0 {
		a.log.WarnContext(ctx, "discord messages waiting for delivery", "chat_id", in.ChatID, "waiting", n)
	}
	if !running {
		a.wg.Add(1)
		go a.drain(ctx, sink, in.ChatID)
	}
}

// drain delivers a chat's queued messages in order. Discord does not
// deliver a message twice, so one the sink fails is held and retried with
// backoff until it is taken or ctx ends.
func (a *Adapter) drain(ctx context.Context, sink adapters.Sink, chat string) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		q := a.lanes[chat]
		if len(q) == 0 {
			delete(a.lanes, chat)
			a.mu.Unlock()
			return
		}
		in := q[0]
		a.mu.Unlock()

		if !a.deliver(ctx, sink, in) {
			a.mu.Lock()
			n := len(a.lanes[chat])
			delete(a.lanes, chat)
			a.mu.Unlock()
			a.log.ErrorContext(ctx, "discord messages not delivered at shutdown", "chat_id", chat, "lost", n)
			return
		}
		a.mu.Lock()
		a.lanes[chat] = a.lanes[chat][1:]
		a.mu.Unlock()
	}
}

// deliver hands in to the sink until it takes it; false means ctx ended
// first.
func (a *Adapter) deliver(ctx context.Context, sink adapters.Sink, in adapters.Inbound) bool {
	for attempt := 1; ; attempt++ {
		err := sink.Deliver(ctx, in)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, adapters.ErrInvalidInbound) { // retrying can't help
			a.log.ErrorContext(ctx, "discord message refused by the gateway", "chat_id", in.ChatID, "message_id", in.MessageID, "error", err)
			return true
		}
		wait := a.deliverBackoff(attempt)
		a.log.WarnContext(ctx, "discord message delivery failed; will retry", "chat_id", in.ChatID,
			"message_id", in.MessageID, "attempt", attempt, "retry_in", wait, "error", err)
		if sleep.For(ctx, wait) != nil {
			return false
		}
	}
}
