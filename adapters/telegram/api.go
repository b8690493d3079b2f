package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/secret"
)

// requestTimeout bounds a Bot API call other than a long poll when the
// caller's context has no deadline of its own.
const requestTimeout = 30 * time.Second

// api calls the Bot API through the library, with a context per call and
// with the token kept out of every error it returns.
type api struct {
	bot      *tgbotapi.BotAPI // a template: each call works on a copy
	http     *http.Client
	redactor *strings.Replacer
}

func newAPI(token secret.String, endpoint string, client *http.Client) *api {
	// BotAPI is built by hand: the library's constructors call getMe with
	// no way to cancel, and Start does that itself.
	bot := &tgbotapi.BotAPI{Token: token.Reveal(), Client: client}
	bot.SetAPIEndpoint(endpoint)
	return &api{bot: bot, http: client, redactor: newRedactor(token)}
}

// newTransport allows as many idle connections as replies in flight: the
// default two per host would reconnect for nearly every send.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return t
}

// newRedactor hides the token, and its secret half on its own, as written
// and as escaped in a URL.
func newRedactor(token secret.String) *strings.Replacer {
	t := token.Reveal()
	var pairs []string
	add := func(s string) {
		if len(s) >= 6 {
			pairs = append(pairs, s, secret.Redacted)
		}
	}
	add(t)
	add(url.PathEscape(t))
	add(url.QueryEscape(t))
	if _, secret, ok := strings.Cut(t, ":"); ok {
		add(secret)
	}
	return strings.NewReplacer(pairs...)
}

// ctxClient binds one call's context to the library's requests, which it
// builds without one.
type ctxClient struct {
	ctx  context.Context
	base *http.Client
}

func (c ctxClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.base.Do(req.WithContext(c.ctx))
	if err == nil && resp.StatusCode >= 400 && !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		// A proxy's error page, not the Bot API's JSON: say what it was
		// rather than that it isn't JSON.
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %s from the Bot API endpoint", resp.Status)
	}
	return resp, err
}

// call makes one Bot API request and returns its raw result. Errors are
// classified (see classify) and never carry the token.
func (a *api) call(ctx context.Context, method string, params tgbotapi.Params) (json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	bot := *a.bot
	bot.Client = ctxClient{ctx: ctx, base: a.http}
	resp, err := bot.MakeRequest(method, params)
	if err != nil {
		return nil, a.classify(ctx, method, err)
	}
	return resp.Result, nil
}

// upload makes one Bot API request that uploads a file as the form field
// field, classified as call's are.
func (a *api) upload(ctx context.Context, method string, params tgbotapi.Params, field string, f tgbotapi.FileBytes) (json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	bot := *a.bot
	bot.Client = ctxClient{ctx: ctx, base: a.http}
	resp, err := bot.UploadFiles(method, params, []tgbotapi.RequestFile{{Name: field, Data: f}})
	if err != nil {
		return nil, a.classify(ctx, method, err)
	}
	return resp.Result, nil
}

// callInto makes a request and decodes its result into v.
func (a *api) callInto(ctx context.Context, method string, params tgbotapi.Params, v any) error {
	raw, err := a.call(ctx, method, params)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("telegram %s: unexpected result: %s", method, a.redact(err.Error()))
	}
	return nil
}

func (a *api) redact(s string) string { return a.redactor.Replace(s) }

// APIError is a refusal by the Bot API other than the ones with their own
// error (rate limits, a wrong token, a group that moved).
type APIError struct {
	Method      string
	Code        int    // the Bot API's error_code, e.g. 400
	Description string // e.g. "Bad Request: chat not found"
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// Is makes a refusal that no retry can change adapters.ErrUndeliverable:
// 403 (the bot was blocked, or removed from the group) and 400 "chat not
// found".
func (e *APIError) Is(target error) bool {
	if target != adapters.ErrUndeliverable {
		return false
	}
	return e.Code == http.StatusForbidden || e.Code == http.StatusBadRequest && strings.Contains(e.Description, "chat not found")
}

// MigratedError says a group became a supergroup with a new chat id, so
// its conversation continues under ChatID.
type MigratedError struct {
	Method string
	ChatID int64
}

func (e *MigratedError) Error() string {
	return fmt.Sprintf("telegram %s: the group was upgraded to a supergroup; its chat id is now %d", e.Method, e.ChatID)
}

// classify turns what the library returned into our errors: 429 becomes
// *adapters.RateLimitError, 401 ErrUnauthorized, other refusals *APIError,
// and transport failures an error with the token taken out. A cancelled
// call wraps ctx's error.
func (a *api) classify(ctx context.Context, method string, err error) error {
	var te *tgbotapi.Error
	if errors.As(err, &te) {
		switch {
		case te.Code == http.StatusTooManyRequests:
			wait := time.Duration(te.RetryAfter) * time.Second
			if wait <= 0 {
				wait = time.Second
			}
			return &adapters.RateLimitError{RetryAfter: wait}
		case te.Code == http.StatusUnauthorized:
			return fmt.Errorf("telegram %s: %w", method, ErrUnauthorized)
		case te.MigrateToChatID != 0:
			return &MigratedError{Method: method, ChatID: te.MigrateToChatID}
		}
		return &APIError{Method: method, Code: te.Code, Description: a.redact(te.Message)}
	}
	if errors.Is(err, adapters.ErrDeadlinePassed) {
		return fmt.Errorf("telegram %s: %w", method, adapters.ErrDeadlinePassed)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("telegram %s: %w", method, cerr)
	}
	return &transportError{method: method, msg: a.redact(err.Error())}
}

// transportError is a failed request, with the token taken out of the
// message. It does not unwrap: the original error holds the URL.
type transportError struct {
	method, msg string
}

func (e *transportError) Error() string { return "telegram " + e.method + ": " + e.msg }

// isTransient reports whether a failed call may work if tried again.
func isTransient(err error) bool {
	var ae *APIError
	switch {
	case errors.Is(err, ErrUnauthorized):
		return false
	case errors.As(err, &ae):
		return ae.Code >= 500 || ae.Code == http.StatusConflict
	}
	return true
}
