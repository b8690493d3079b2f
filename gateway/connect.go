package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/commands"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/vault"
)

// pendingConnects are the /connect commands waiting for their token: the
// sender's next message in the same direct chat.
type pendingConnects struct {
	mu sync.Mutex
	m  map[connectKey]pendingConnect
}

type connectKey struct {
	adapter      adapters.ID
	chat, userID string
}

type pendingConnect struct {
	provider string
	until    time.Time
}

// token is a message that holds a token for /connect.
type token struct {
	provider, value string
	// inline: "/connect <provider> <token>" in one message.
	inline bool
}

func connectKeyOf(in adapters.Inbound) connectKey {
	return connectKey{adapter: in.Adapter, chat: in.ChatID, userID: in.UserID}
}

func userOf(in adapters.Inbound) string { return in.Surface + ":" + in.UserID }

// takeToken says whether in carries a token for /connect: the next
// message after /connect in the same direct chat (unless it is a
// command, which cancels the wait), or a /connect with the token after
// the provider (or in place of it). In a group, any message with a
// /connect in it (after a mention, say) is one: refused, whatever
// follows it. A waiting /connect it answers is taken.
func (g *Gateway) takeToken(in adapters.Inbound) (token, bool) {
	if in.Group {
		provider, value, ok := connectIn(in.Text)
		return token{provider: provider, value: value, inline: true}, ok
	}
	if c, arg, ok := commands.ParseArg(in.Text); ok {
		provider, value, inline := strings.Cut(arg, " ")
		if c.Name == "connect" && inline {
			return token{provider: provider, value: strings.TrimSpace(value), inline: true}, true
		}
		// "/connect <token>", the provider left out: stored with its
		// text replaced, as any token is.
		if c.Name == "connect" && provider != "" && !vault.LooksLikeProvider(strings.ToLower(provider)) {
			return token{provider: provider, inline: true}, true
		}
	}
	g.pending.mu.Lock()
	defer g.pending.mu.Unlock()
	p, ok := g.pending.m[connectKeyOf(in)]
	if !ok {
		return token{}, false
	}
	delete(g.pending.m, connectKeyOf(in))
	if time.Now().After(p.until) || strings.HasPrefix(strings.TrimSpace(in.Text), "/") {
		return token{}, false
	}
	return token{provider: p.provider, value: strings.TrimSpace(in.Text)}, true
}

// connectIn finds a /connect (or /connect@bot) anywhere in text, as a
// group message has it after a mention of the bot, and what follows it.
func connectIn(text string) (provider, value string, ok bool) {
	fields := strings.Fields(text)
	for i, f := range fields {
		name, _, _ := strings.Cut(f, "@")
		if !strings.EqualFold(name, "/connect") {
			continue
		}
		if i+1 < len(fields) {
			provider = strings.ToLower(fields[i+1])
		}
		if i+2 < len(fields) {
			value = strings.Join(fields[i+2:], " ")
		}
		return provider, value, true
	}
	return "", "", false
}

// acceptToken stores the token's message as answered, with its text
// replaced, and the token sealed (or the refusal) in the same
// transaction: the token never reaches the conversation, the model or the
// inbound record.
func (g *Gateway) acceptToken(ctx context.Context, in adapters.Inbound, t token) error {
	known := g.opts.Connections != nil && slices.Contains(g.opts.Connections.Providers(), t.provider)
	kept := in
	kept.Text = "[a token for /connect, kept out of the conversation]"
	if known { // else the "provider" may be the token itself
		kept.Text = fmt.Sprintf("[a %s token for /connect, kept out of the conversation]", t.provider)
	}
	kept.Files = nil
	// Only a sender the access policy admits may connect, quietly: a
	// stranger is told nothing. A waiting /connect is asked again, for
	// the policy may have changed, or the wait began on a replica that
	// took the /connect before its access check.
	admitted := true
	if !in.Group {
		var err error
		if admitted, err = g.admitsDirect(ctx, in); err != nil {
			return err
		}
	}
	var reply string
	var stored bool
	_, dup, err := g.opts.Store.AcceptAnswered(ctx, kept, func(q dbutil.Querier, id string) error {
		stored = false
		switch {
		case !admitted && !in.Group:
			return nil
		case in.Group && t.value == "" && (known || t.provider == ""):
			reply = "/connect works only in a direct chat with me: send it there, so your token isn't posted here."
		case in.Group:
			reply = "I didn't store that: /connect works only in a direct chat with me. A token posted here is seen by everyone in the chat; revoke it and make a new one, then send /connect to me directly."
		case !known:
			reply = g.connectUsage(t.provider)
		case t.value == "" || strings.ContainsAny(t.value, " \n\t"):
			reply = fmt.Sprintf("That doesn't look like a token (it has spaces); send /connect %s again, then the token alone.", t.provider)
		default:
			if err := g.opts.Connections.Connect(ctx, q, userOf(in), t.provider, t.value); err != nil {
				return err
			}
			stored = true
			reply = "connected " + t.provider + ": your tools for it now act with your own account. You may delete your message with the token."
		}
		j := job{inboundID: id, in: kept}
		_, replies, _ := g.record(outcome{jobs: []job{j}, status: InboundDone, replyTo: j, text: reply})
		return g.opts.Store.queueReplies(ctx, q, g.opts.Store.now(), replies)
	})
	if err != nil {
		if !t.inline {
			g.waitToken(in, t.provider) // the channel's redelivery is still the token
		}
		return fmt.Errorf("store a /connect token for %s: %w", t.provider, err)
	}
	if dup {
		return nil
	}
	if stored {
		g.opts.Log.InfoContext(ctx, "user connected a provider", "adapter", in.Adapter, "user", userOf(in), "provider", t.provider)
	}
	if g.opts.Sender != nil {
		g.opts.Sender.Wake()
	}
	return nil
}

// waitToken takes the sender's next message in the chat as their token.
func (g *Gateway) waitToken(in adapters.Inbound, provider string) {
	g.pending.mu.Lock()
	defer g.pending.mu.Unlock()
	if g.pending.m == nil {
		g.pending.m = map[connectKey]pendingConnect{}
	}
	now := time.Now()
	for k, p := range g.pending.m {
		if now.After(p.until) {
			delete(g.pending.m, k)
		}
	}
	g.pending.m[connectKeyOf(in)] = pendingConnect{provider: provider, until: now.Add(g.opts.ConnectTimeout)}
}

// waitTokenHere waits for the token of a /connect in a direct chat on
// the replica that took it (see deliver), if the sender is one the access
// policy admits: this runs before the access check.
func (g *Gateway) waitTokenHere(ctx context.Context, in adapters.Inbound) {
	c, arg, ok := commands.ParseArg(in.Text)
	if !ok || c.Name != "connect" || in.Group || g.opts.Connections == nil {
		return
	}
	provider := strings.ToLower(strings.TrimSpace(arg))
	if provider == "" || !slices.Contains(g.opts.Connections.Providers(), provider) {
		return
	}
	// On a database fault it waits all the same: the token must not
	// become an ordinary message, and acceptToken asks again.
	if admitted, err := g.admitsDirect(ctx, in); err == nil && !admitted {
		return
	}
	g.waitToken(in, provider)
}

// connectUsage says which providers /connect takes.
func (g *Gateway) connectUsage(provider string) string {
	var providers []string
	if g.opts.Connections != nil {
		providers = g.opts.Connections.Providers()
	}
	switch {
	case len(providers) == 0:
		return "/connect is not available here: no tool takes people's own tokens (or parley has no secrets key)."
	case provider == "":
		return "Say which: /connect " + strings.Join(providers, " | /connect ")
	}
	if !vault.LooksLikeProvider(provider) {
		// Not a name: maybe the token itself, sent without the provider.
		// Never say it back.
		return "That is not a provider I take tokens for (if it was your token, revoke it and make a new one); use /connect " +
			strings.Join(providers, " | /connect ")
	}
	return fmt.Sprintf("%q is not a provider I take tokens for; use /connect %s", provider, strings.Join(providers, " | /connect "))
}

// connect starts a /connect: the sender's next message in this direct
// chat is their token.
func (g *Gateway) connect(_ context.Context, j job, provider string) string {
	switch {
	case j.in.Group:
		return "/connect works only in a direct chat with me, so your token isn't posted here."
	case g.opts.Connections == nil || !slices.Contains(g.opts.Connections.Providers(), provider):
		return g.connectUsage(provider)
	}
	g.waitToken(j.in, provider)
	return fmt.Sprintf("Send your %s token as your next message here (within %s). It is stored encrypted, used only for your own %s tool calls, and never shown to the assistant. Send any /command to cancel.",
		provider, g.opts.ConnectTimeout.Round(time.Minute), provider)
}

// disconnect forgets the sender's token for a provider.
func (g *Gateway) disconnect(ctx context.Context, j job, provider string) string {
	if g.opts.Connections == nil || provider == "" {
		return strings.Replace(g.connectUsage(provider), "/connect", "/disconnect", -1)
	}
	found, err := g.opts.Connections.Disconnect(ctx, userOf(j.in), provider)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		_, text := g.failed(ctx, j.key, "disconnect a provider", err, "Sorry, I couldn't forget your token")
		return text
	case !found:
		return fmt.Sprintf("You have no %s token stored.", provider)
	}
	return "disconnected " + provider + ": your token is deleted."
}

// admitsDirect says whether the access policy lets in.UserID talk to the
// bot in a direct chat, without the side effects of asking (a pairing
// code).
func (g *Gateway) admitsDirect(ctx context.Context, in adapters.Inbound) (bool, error) {
	pol, ok := g.policies().access[in.Adapter]
	if !ok || pol.DM == DMOpen || pol.Allow[in.UserID] {
		return true, nil
	}
	return g.opts.Store.Allowed(ctx, in.Adapter, in.UserID)
}
