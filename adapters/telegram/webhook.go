package telegram

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/internal/throttle"
)

// SecretHeader carries webhook.secret_token in every webhook request.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxWebhookBody bounds one webhook request; an update is a few KiB.
const maxWebhookBody = 1 << 20

// An address that sends webhookGuesses wrong secret tokens within
// webhookGuessWindow has its wrong ones refused with 429 and no log line
// for the rest of the window. The right secret still passes: behind a
// reverse proxy every request shares one address, so a block on the
// address would lock Telegram out too, and a secret of 32 or more random
// characters resists guessing without it.
const (
	webhookGuesses     = 10
	webhookGuessWindow = time.Minute
)

// Webhook implements adapters.WebhookHandler: in webhook mode it returns
// the pattern "POST <webhook.path>" and the handler to mount on parley's
// HTTP server; in polling mode it returns "" and nil.
//
// The handler answers 401 without the right secret token, 503 until Start
// runs, 413 past 1 MiB, and 200 only once the sink took the message (or
// the update is one that is ignored); a sink failure answers 503, so
// Telegram sends the update again.
func (a *Adapter) Webhook() (string, http.Handler) {
	if a.cfg.mode != ModeWebhook {
		return "", nil
	}
	return http.MethodPost + " " + a.cfg.path, http.HandlerFunc(a.serveWebhook)
}

func (a *Adapter) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	// Compare digests so neither the content nor the length of the secret
	// shows in the timing.
	got := sha256.Sum256([]byte(r.Header.Get(SecretHeader)))
	want := sha256.Sum256([]byte(a.cfg.secretToken.Reveal()))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		addr := throttle.Addr(r)
		if blocked, wait := a.guesses.Blocked(addr); blocked {
			a.refused("throttled")
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			http.Error(w, "too many wrong secret tokens from this address; wait", http.StatusTooManyRequests)
			return
		}
		a.refused("secret_token")
		if a.guesses.Fail(addr) {
			a.log.WarnContext(r.Context(), "telegram webhook: too many wrong secret tokens; refusing the address for a while",
				"adapter", a.id, "remote_addr", addr, "for", webhookGuessWindow)
		} else {
			a.log.WarnContext(r.Context(), "telegram webhook: a request with a wrong or missing secret token refused",
				"adapter", a.id, "remote_addr", addr)
		}
		http.Error(w, "wrong or missing "+SecretHeader, http.StatusUnauthorized)
		return
	}
	box := a.sink.Load()
	if box == nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "not started yet", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "update larger than 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the update: "+err.Error(), http.StatusBadRequest)
		return
	}
	var u update
	if err := json.Unmarshal(body, &u); err != nil {
		http.Error(w, "not a Telegram update: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	if u.CallbackQuery != nil {
		a.press(ctx, box.Sink, u.CallbackQuery)
		w.WriteHeader(http.StatusOK)
		return
	}
	in, ok := toInbound(a.id, a.identity(), &u)
	if !ok || !a.valid(ctx, u.UpdateID, in) {
		w.WriteHeader(http.StatusOK) // nothing to take; Telegram need not send it again
		return
	}
	if !a.deliverOne(ctx, box.Sink, u.UpdateID, in) {
		http.Error(w, "not taken; send it again", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// setWebhook points Telegram at webhook.url with the secret token.
func (a *Adapter) setWebhook(ctx context.Context) error {
	params := tgbotapi.Params{
		"url":                  a.cfg.webhookURL,
		"secret_token":         a.cfg.secretToken.Reveal(),
		"allowed_updates":      allowedUpdates,
		"drop_pending_updates": "false",
	}
	err := a.retry(ctx, "setWebhook", func(ctx context.Context) error {
		_, err := a.api.call(ctx, "setWebhook", params)
		return err
	})
	if err == nil {
		a.log.InfoContext(ctx, "telegram webhook set", "url", a.cfg.webhookURL, "path", a.cfg.path)
	}
	return err
}
