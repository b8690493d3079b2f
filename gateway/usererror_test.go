package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/internal/syncbuf"
	"github.com/parleyd/parley/llm"
	"github.com/parleyd/parley/sessions"
)

// refReply finds the reference id in a reply.
var refReply = regexp.MustCompile(`\(ref ([0-9a-f]{8})\)`)

// A group member who can make a turn fail (a database error, a provider
// error body naming an internal host, an unreachable provider, a refused
// key) learns nothing about the host from the reply or from /status: a
// plain message and a reference id, whose detail the operator finds in
// the log under that id.
func TestFailuresTellChatUsersNoInternals(t *testing.T) {
	const sessionID = "0193a7b2-5c1e-7d4f-8a9b-1c2d3e4f5a6b"
	unreachable := fmt.Errorf("openai: %w", &url.Error{Op: "Post", URL: "http://127.0.0.1:18599/v1/chat/completions",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
	cases := []struct {
		name       string
		err        error
		configured bool // false: the reply says the assistant isn't configured
	}{
		{"database error", fmt.Errorf("append message to session %s: %w", sessionID,
			errors.New(`ERROR: duplicate key value violates unique constraint "messages_pkey" (SQLSTATE 23505)`)), true},
		{"provider error body", &llm.StatusError{Provider: "openai", StatusCode: 400,
			Message: "upstream http://llm-gw.internal.corp:8443/v1 refused the request"}, true},
		{"provider unreachable", unreachable, true},
		{"key refused", &llm.StatusError{Provider: "openai", StatusCode: 401, Message: "Incorrect API key provided: sk-ab***cd"}, false},
		{"no key", fmt.Errorf("open model openai/gpt-4o-mini: %w: providers.openai has neither an api_key nor a base_url", llm.ErrNotConfigured), false},
	}
	internals := []string{"127.0.0.1", "18599", "SQLSTATE", "23505", "duplicate key", sessionID, "internal.corp", "8443",
		"dial tcp", "sk-", "openai", "api_key", "providers."}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				logs := &syncbuf.Buffer{}
				r := newRig(t, open(t), func(context.Context, gateway.TurnInput) (string, error) { return "", tc.err },
					func(o *gateway.Options) { o.Log = slog.New(slog.NewJSONHandler(logs, nil)) })
				in := msg("1", "@parleybot what's up?")
				in.Group, in.Mentioned, in.ChatID = true, true, "-100"
				r.deliver(in)
				reply := r.sent(1)[0]
				m := refReply.FindStringSubmatch(reply)
				if m == nil {
					t.Fatalf("reply has no reference id: %q", reply)
				}
				ref := m[1]
				for _, s := range internals {
					if strings.Contains(reply, s) {
						t.Errorf("reply %q shows %q", reply, s)
					}
				}
				notConfigured := "The assistant isn't configured correctly (ref " + ref + "); the operator has been told."
				if got := reply == notConfigured; got == tc.configured {
					t.Errorf("reply %q: want the not-configured message %v", reply, !tc.configured)
				}

				// /status names the failure by its ref, in plain words.
				st := in
				st.MessageID, st.Text = "2", "/status"
				r.deliver(st)
				status := r.sent(2)[1]
				if !strings.Contains(status, "Last error: ref "+ref) {
					t.Errorf("/status doesn't name the last failure by its ref %s: %q", ref, status)
				}
				for _, s := range internals {
					if strings.Contains(status, s) {
						t.Errorf("/status %q shows %q", status, s)
					}
				}
				if f, ok := r.gw.LastFailure(gateway.SessionKey(in, "default")); !ok || f.Ref != ref {
					t.Errorf("LastFailure = %+v, %v; want ref %s", f, ok, ref)
				}

				// The operator finds the whole error in the log, under the ref.
				var line string
				for l := range strings.SplitSeq(logs.String(), "\n") {
					if strings.Contains(l, `"ref":"`+ref+`"`) {
						line = l
					}
				}
				detail, _ := jsonString(tc.err.Error())
				if line == "" || !strings.Contains(line, detail) {
					t.Errorf("no log line with ref %s and the error %q:\n%s", ref, tc.err, logs.String())
				}
			})
		})
	}
}

// jsonString is s as it appears inside a JSON string.
func jsonString(s string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	out := strings.TrimSpace(b.String())
	return out[1 : len(out)-1], nil
}

// /reset's and /compact's failures are told the same way.
func TestCommandFailuresTellNoInternals(t *testing.T) {
	const leak = "dial tcp 10.20.30.40:5432: connect: connection refused (SQLSTATE 08006)"
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Sessions = failingReset{o.Sessions}
		o.Runner = compacting{o.Runner, func(context.Context, sessions.Session, string) (string, error) { return "", errors.New(leak) }}
	})
	r.deliver(msg("1", "hi"))
	r.sent(1)
	r.deliver(msg("2", "/compact"))
	r.sent(2) // before /reset, which would interrupt it
	r.deliver(msg("3", "/reset"))
	got := r.sent(3)
	for i, want := range []string{"Sorry, I couldn't compact this conversation (ref ", "Sorry, I couldn't start a new conversation (ref "} {
		if reply := got[i+1]; !strings.HasPrefix(reply, want) || !refReply.MatchString(reply) || strings.Contains(reply, "10.20.30.40") ||
			strings.Contains(reply, "SQLSTATE") {
			t.Errorf("reply %q, want %q… with a ref and no internals", reply, want)
		}
	}
}

// A /compact that /reset interrupts says it stopped: no apology, no ref.
func TestInterruptedCompactionSaysStopped(t *testing.T) {
	started := make(chan struct{})
	r := newRig(t, dbtest.SQLite(t), echoRun, func(o *gateway.Options) {
		o.Runner = compacting{o.Runner, func(ctx context.Context, _ sessions.Session, _ string) (string, error) {
			close(started)
			<-ctx.Done()
			return "", ctx.Err()
		}}
	})
	r.deliver(msg("1", "hi"))
	r.sent(1)
	r.deliver(msg("2", "/compact"))
	<-started
	r.deliver(msg("3", "/reset"))
	got := r.sent(3)
	if got[1] != "Stopped." || got[2] != "Started a new conversation." {
		t.Fatalf("replies %q, want the compaction stopped, then the reset", got[1:])
	}
}

type failingReset struct{ sessions.Store }

func (failingReset) Reset(context.Context, sessions.Key) (sessions.Session, error) {
	return sessions.Session{}, errors.New("reset: dial tcp 10.20.30.40:5432: connect: connection refused (SQLSTATE 08006)")
}
