// Package telegram is the Telegram channel, on the Bot API through
// go-telegram-bot-api.
//
// Updates arrive by long polling (the default) or by webhook on parley's
// own HTTP server (see Webhook). Either way an update is acknowledged to
// Telegram only after the sink took it: in polling mode the getUpdates
// offset moves past an update only once Deliver returned nil for it; in
// webhook mode the 200 answer waits for Deliver. After a crash Telegram
// sends the unacknowledged updates again, with the same chat and message
// ids, and the gateway drops the repeats.
//
// Conversations: a private chat or group is ChatID "<chat id>"; a topic of
// a forum supergroup is "<chat id>:topic:<message_thread_id>", its own
// session, and Send posts back into that topic. New messages, their edits
// and presses on the bot's own buttons are taken (allowed_updates
// ["message", "edited_message", "callback_query"]): an edit is a message
// of its own (MessageID "<id>:edit:<edit date>") whose Edits names the
// message it edits, but for a live location's moves. Channel posts and
// service messages are not taken, nor polls; a shared place, contact or
// sticker is taken as a line of text, and a video note as a file
// transcribed as a voice note is. A press goes to the sink's
// adapters.PressSink and is answered with its note (answerCallbackQuery).
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/sleep"
	"github.com/parleyd/parley/internal/throttle"
	"github.com/parleyd/parley/secret"
)

// MaxMessageLength is Telegram's limit on one message's text.
const MaxMessageLength = 4096

func init() { adapters.RegisterNew("telegram", New) }

// Adapter is one Telegram bot.
type Adapter struct {
	id  adapters.ID
	cfg settings
	api *api
	log *slog.Logger

	me   atomic.Pointer[identity] // known once Start asked getMe
	sink atomic.Pointer[sinkBox]  // set by Start; the webhook handler waits for it

	started atomic.Bool
	health  atomic.Pointer[health]
	// healthChanged, if set (by tests, before Start), hears every change.
	healthChanged func()
	// backoff is the wait before retry n (from 1); tests shorten it.
	backoff func(n int) time.Duration
	// guesses counts wrong secret tokens per address at the webhook.
	guesses *throttle.Failures
	// refused counts a refused webhook request (deps.Refused).
	refused func(reason string)
}

type sinkBox struct{ adapters.Sink }

var (
	_ adapters.Adapter        = (*Adapter)(nil)
	_ adapters.Limiter        = (*Adapter)(nil)
	_ adapters.Editor         = (*Adapter)(nil)
	_ adapters.Typer          = (*Adapter)(nil)
	_ adapters.WebhookHandler = (*Adapter)(nil)
	_ adapters.Fetcher        = (*Adapter)(nil)
	// The daemon's /readyz asks channels for this.
	_ interface{ Health() (bool, string) } = (*Adapter)(nil)
)

// New builds an adapter from its config section. An empty token is
// adapters.ErrNoCredentials, so the daemon skips the channel.
func New(id adapters.ID, decode adapters.Decoder, deps adapters.Deps) (*Adapter, error) {
	log := deps.Logger()
	cfg, err := parseConfig(id, decode, log)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: adapters.GuardDeadline(newTransport())}
	a := &Adapter{id: id, cfg: cfg, api: newAPI(cfg.token, cfg.endpoint, client), log: log, backoff: adapters.Backoff(500*time.Millisecond, 30*time.Second),
		guesses: throttle.New(webhookGuesses, webhookGuessWindow), refused: deps.CountRefused}
	if cfg.botUsername != "" {
		a.me.Store(&identity{id: botIDFromToken(cfg.token), username: cfg.botUsername})
	}
	return a, nil
}

// botIDFromToken is the bot's user id, the part of its token before ":".
func botIDFromToken(token secret.String) int64 {
	s, _, _ := strings.Cut(token.Reveal(), ":")
	id, _ := strconv.ParseInt(s, 10, 64)
	return id
}

// MaxMessageLength implements adapters.Limiter.
func (a *Adapter) MaxMessageLength() int { return MaxMessageLength }

// Start asks Telegram who the bot is, then receives updates until ctx
// ends: by long polling, or in webhook mode by registering the webhook and
// letting the handler take them. It returns an error wrapping
// ErrUnauthorized at once if the token is refused; other failures are
// logged and retried.
func (a *Adapter) Start(ctx context.Context, sink adapters.Sink) error {
	if !a.started.CompareAndSwap(false, true) {
		return fmt.Errorf("telegram adapter %s: Start called twice", a.id)
	}
	defer a.started.Store(false)
	defer func() {
		if ctx.Err() != nil {
			a.setHealth(false, "stopped")
		}
	}()
	if err := a.identify(ctx); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			a.setHealth(false, "Telegram refused the bot token (401); fix the adapter's token")
		}
		return ignoreCanceled(err)
	}
	if a.cfg.mode == ModeWebhook {
		a.sink.Store(&sinkBox{sink})
		defer a.sink.Store(nil)
		if err := a.setWebhook(ctx); err != nil {
			a.setHealth(false, "setWebhook failed: "+err.Error())
			return ignoreCanceled(err)
		}
		a.setHealth(true, "webhook for @"+a.identity().username+" on "+a.cfg.path)
		<-ctx.Done()
		return nil
	}
	// Polling and a webhook exclude each other: drop one left from webhook
	// mode, keeping the updates it had pending.
	if err := a.retry(ctx, "deleteWebhook", func(ctx context.Context) error {
		_, err := a.api.call(ctx, "deleteWebhook", tgbotapi.Params{"drop_pending_updates": "false"})
		return err
	}); err != nil {
		return ignoreCanceled(err)
	}
	// The token works and nothing else takes the updates: polling, until
	// a getUpdates says otherwise (a long poll may wait a while first).
	a.setHealth(true, "polling as @"+a.identity().username)
	return ignoreCanceled(a.poll(ctx, sink))
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// identify learns the bot's id and username from getMe, which also checks
// the token.
func (a *Adapter) identify(ctx context.Context) error {
	var u tgbotapi.User
	err := a.retry(ctx, "getMe", func(ctx context.Context) error {
		return a.api.callInto(ctx, "getMe", nil, &u)
	})
	if err != nil {
		return err
	}
	me := identity{id: u.ID, username: u.UserName}
	if a.cfg.botUsername != "" {
		if u.UserName != "" && !strings.EqualFold(u.UserName, a.cfg.botUsername) {
			a.log.WarnContext(ctx, "telegram bot_username differs from what getMe says; using bot_username",
				"bot_username", a.cfg.botUsername, "get_me_username", u.UserName)
		}
		me.username = a.cfg.botUsername
	}
	a.me.Store(&me)
	a.log.InfoContext(ctx, "telegram bot ready", "bot_username", me.username, "bot_id", me.id, "mode", a.cfg.mode)
	return nil
}

// retry runs f until it succeeds, ctx ends, or it fails in a way another
// try won't fix (a refused token, a bad request), backing off between
// tries and honouring retry_after.
func (a *Adapter) retry(ctx context.Context, what string, f func(context.Context) error) error {
	for n := 1; ; n++ {
		err := f(ctx)
		if err == nil || ctx.Err() != nil || !isTransient(err) {
			return err
		}
		wait := a.backoff(n)
		var rl *adapters.RateLimitError
		if errors.As(err, &rl) && rl.RetryAfter > wait {
			wait = rl.RetryAfter
		}
		a.log.WarnContext(ctx, "telegram call failed; retrying", "call", what, "attempt", n, "retry_in", wait, "error", err)
		a.setHealth(false, what+" failing: "+err.Error())
		if err := sleep.For(ctx, wait); err != nil {
			return err
		}
	}
}

// BotNames is the bot's username, for a voice note that says it.
func (a *Adapter) BotNames() []string {
	if me := a.identity(); me.username != "" {
		return []string{me.username}
	}
	return nil
}

// identity returns who the bot is; before getMe answered, only what the
// config says.
func (a *Adapter) identity() identity {
	if me := a.me.Load(); me != nil {
		return *me
	}
	return identity{id: botIDFromToken(a.cfg.token)}
}

type health struct {
	ok     bool
	detail string
}

// setHealth records the state /readyz shows; the token never is in it.
func (a *Adapter) setHealth(ok bool, detail string) {
	if h := a.health.Load(); h != nil && h.ok == ok && h.detail == detail {
		return
	}
	a.health.Store(&health{ok, detail})
	if a.healthChanged != nil {
		a.healthChanged()
	}
}

// Health reports whether the bot is receiving updates, and how, for the
// daemon's /readyz.
func (a *Adapter) Health() (bool, string) {
	h := a.health.Load()
	if h == nil {
		return false, "not started"
	}
	return h.ok, h.detail
}

// String describes the adapter without its token.
func (a *Adapter) String() string {
	return fmt.Sprintf("telegram adapter %s (%s)", a.id, a.cfg.mode)
}
