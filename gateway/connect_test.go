package gateway_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
)

// fakeConnections keeps tokens in memory, written in the caller's
// transaction.
type fakeConnections struct {
	mu     sync.Mutex
	tokens map[string]string
}

func (f *fakeConnections) Providers() []string { return []string{"github"} }

func (f *fakeConnections) Connect(ctx context.Context, q dbutil.Querier, user, provider, token string) error {
	if _, err := q.ExecContext(ctx, "SELECT 1"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[user+"/"+provider] = token
	return nil
}

func (f *fakeConnections) Disconnect(_ context.Context, user, provider string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.tokens[user+"/"+provider]
	delete(f.tokens, user+"/"+provider)
	return ok, nil
}

func (f *fakeConnections) token(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[key]
}

// /connect takes the sender's next message in the direct chat as their
// token: it is stored, answered "connected github", and never reaches a
// turn, the session or the inbound record.
func TestConnectTakesTheNextMessageAsTheToken(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		var turns atomic.Int64
		conns := &fakeConnections{tokens: map[string]string{}}
		r := newRig(t, db, func(ctx context.Context, in gateway.TurnInput) (string, error) {
			turns.Add(1)
			return echoRun(ctx, in)
		}, func(o *gateway.Options) { o.Connections = conns })

		r.deliver(msg("1", "/connect github"))
		if got := r.sent(1)[0]; !strings.Contains(got, "Send your github token as your next message") {
			t.Fatalf("/connect answered %q", got)
		}
		r.deliver(msg("2", "ghp_s3cr3t"))
		if got := r.sent(2)[1]; !strings.HasPrefix(got, "connected github") {
			t.Fatalf("the token was answered %q", got)
		}
		if conns.token("telegram:7/github") != "ghp_s3cr3t" {
			t.Fatalf("stored tokens = %v", conns.tokens)
		}
		// A redelivery of the token's message is a duplicate, not a turn.
		r.deliver(msg("2", "ghp_s3cr3t"))
		// The next message is an ordinary turn again.
		r.deliver(msg("3", "hello"))
		if got := r.sent(3)[2]; got != "echo: hello" {
			t.Fatalf("after connecting: %q", got)
		}
		// The inline form works too, and a command cancels a wait.
		r.deliver(msg("4", "/connect github ghp_inline"))
		if got := r.sent(4)[3]; !strings.HasPrefix(got, "connected github") || conns.token("telegram:7/github") != "ghp_inline" {
			t.Fatalf("inline: %q, %v", got, conns.tokens)
		}
		r.deliver(msg("5", "/connect github"))
		r.deliver(msg("6", "/status"))
		r.deliver(msg("7", "not a token"))
		if got := r.sent(7)[6]; got != "echo: not a token" {
			t.Fatalf("a message after a cancelled /connect: %q", got)
		}
		r.deliver(msg("8", "/disconnect github"))
		if got := r.sent(8)[7]; !strings.HasPrefix(got, "disconnected github") || conns.token("telegram:7/github") != "" {
			t.Fatalf("/disconnect: %q, %v", got, conns.tokens)
		}
		// In a group: refused, and the token is not stored.
		g := msg("9", "/connect github ghp_group")
		g.Group, g.Mentioned, g.ChatID = true, true, "-100"
		r.deliver(g)
		if got := r.sent(9)[8]; !strings.Contains(got, "only in a direct chat") || conns.token("telegram:7/github") != "" {
			t.Fatalf("in a group: %q, %v", got, conns.tokens)
		}
		r.deliver(msg("10", "/connect gitlab"))
		if got := r.sent(10)[9]; !strings.Contains(got, `"gitlab" is not a provider`) {
			t.Fatalf("an unknown provider: %q", got)
		}
		// A token sent without its provider is never said back.
		r.deliver(msg("11", "/connect ghp_NoProviderToken0123456789abcdefABCDEF"))
		if got := r.sent(11)[10]; strings.Contains(got, "NoProviderToken") || !strings.Contains(got, "revoke it") {
			t.Fatalf("a token without its provider: %q", got)
		}
		if turns.Load() != 2 {
			t.Errorf("%d turns ran, want 2 (hello, not a token)", turns.Load())
		}
		// No token is in any stored row.
		for _, q := range []string{"SELECT payload FROM inbound", "SELECT content FROM messages", "SELECT text FROM outbox"} {
			rows, err := db.Reader().QueryContext(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				for _, tok := range []string{"ghp_s3cr3t", "ghp_inline", "ghp_group", "NoProviderToken"} {
					if strings.Contains(s, tok) {
						t.Errorf("%s holds the token: %s", q, s)
					}
				}
			}
			rows.Close()
		}
	})
}

// herePlacement places every session on this replica, as one replica of
// several does for the sessions it holds.
type herePlacement struct{}

func (herePlacement) Place(context.Context, string) (string, string, bool, error) {
	return "h", "me", true, nil
}

// /connect is honoured only for a sender the access policy admits, also
// among replicas (where the wait for the token began before the access
// check); in a group, a /connect after a mention of the bot is refused
// before it is stored, with a note to use a direct chat, and never
// reaches a turn.
func TestConnectOnlyFromAdmittedSendersInDirectChats(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		var turns atomic.Int64
		conns := &fakeConnections{tokens: map[string]string{}}
		r := newRig(t, db, func(ctx context.Context, in gateway.TurnInput) (string, error) {
			turns.Add(1)
			return echoRun(ctx, in)
		}, func(o *gateway.Options) {
			o.Connections = conns
			o.Placement = herePlacement{}
			o.Access = map[adapters.ID]gateway.Access{"tg": {DM: gateway.DMPairing, Group: gateway.GroupMention, Groups: gateway.GroupsOpen}}
		})
		r.deliver(dm("9", "1", "/connect github"))
		r.deliver(dm("9", "2", "ghp_stranger"))
		r.deliver(dm("9", "3", "/connect github ghp_inline"))
		sent := r.sent(2)
		if !strings.Contains(sent[0], "pairing code") || !strings.Contains(sent[1], "pairing code") {
			t.Fatalf("a stranger's /connect and token were answered %q", sent)
		}
		g := group("7", "4", "@parleybot /connect github ghp_group", true)
		r.deliver(g)
		got := r.sent(3)[2]
		if !strings.Contains(got, "only in a direct chat") {
			t.Fatalf("a /connect after a mention in a group was answered %q", got)
		}
		r.deliver(group("7", "5", "@parleybot /connect github", true))
		if got := r.sent(4)[3]; !strings.Contains(got, "only in a direct chat") {
			t.Fatalf("a bare /connect in a group was answered %q", got)
		}
		if len(conns.tokens) != 0 || turns.Load() != 0 {
			t.Fatalf("tokens stored %v, %d turns ran", conns.tokens, turns.Load())
		}
		for _, q := range []string{"SELECT payload FROM inbound", "SELECT content FROM messages", "SELECT text FROM outbox"} {
			rows, err := db.Reader().QueryContext(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(s, "ghp_group") {
					t.Errorf("%s holds the token: %s", q, s)
				}
			}
			rows.Close()
		}
	})
}
