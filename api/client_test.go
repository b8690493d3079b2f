package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api/apiclient"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/echo"
)

// TestGeneratedClient: the client generated from openapi.yaml creates a
// session, sends a message, follows the run's events and reads the
// reply, against the API handler over a real database and the echo model
// (every response also checked against the document by newAPIServer).
func TestGeneratedClient(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newAgentEnv(t, open, echo.New())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := apiclient.NewClientWithResponses(e.srv.URL, apiclient.WithHTTPClient(e.srv.Client()),
			apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
				req.Header.Set("Authorization", "Bearer "+token)
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}

		title := "through the generated client"
		created, err := c.CreateSessionWithResponse(ctx, apiclient.CreateSessionJSONRequestBody{Title: &title})
		if err != nil || created.JSON201 == nil {
			t.Fatalf("create session: %v %s", err, body(created))
		}
		sess := created.JSON201
		if sess.Title != title || sess.Status != apiclient.SessionStatusActive || sess.Key.AgentId != "main" {
			t.Fatalf("created %+v", sess)
		}

		const words = "hello from a generated client"
		sent, err := c.SendMessageWithResponse(ctx, sess.Id, nil, apiclient.SendMessageJSONRequestBody{Content: words})
		if err != nil || sent.JSON202 == nil || sent.JSON202.RunId == "" {
			t.Fatalf("send: %v %s", err, body(sent))
		}
		runID := sent.JSON202.RunId

		res, err := c.StreamEvents(ctx, sess.Id, &apiclient.StreamEventsParams{RunId: &runID})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		var streamed strings.Builder
		var finished *apiclient.TurnFinishedEvent
		sc := bufio.NewScanner(res.Body)
		for finished == nil && sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev apiclient.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %s: %v", data, err)
			}
			var kind struct{ Type string }
			_ = json.Unmarshal([]byte(data), &kind)
			switch kind.Type {
			case "message.delta":
				d, err := ev.AsMessageDeltaEvent()
				if err != nil || d.RunId != runID {
					t.Fatalf("delta %s: %v", data, err)
				}
				streamed.WriteString(d.Data.Text)
			case "turn.finished":
				f, err := ev.AsTurnFinishedEvent()
				if err != nil {
					t.Fatalf("turn.finished %s: %v", data, err)
				}
				finished = &f
			}
		}
		if finished == nil {
			t.Fatalf("the stream ended without turn.finished: %v", sc.Err())
		}
		if finished.Data.Aborted || finished.Data.Error != nil || finished.Data.Steps < 1 {
			t.Fatalf("turn.finished %+v", finished.Data)
		}
		if streamed.String() != words {
			t.Fatalf("streamed %q, want the echo of %q", streamed.String(), words)
		}

		msgs, err := c.ListMessagesWithResponse(ctx, sess.Id, nil)
		if err != nil || msgs.JSON200 == nil {
			t.Fatalf("messages: %v %s", err, body(msgs))
		}
		var user, reply string
		for _, m := range msgs.JSON200.Messages {
			switch m.Role {
			case apiclient.MessageRoleUser:
				user = m.Content
			case apiclient.MessageRoleAssistant:
				reply = m.Content
			}
		}
		if user != words || reply != words {
			t.Fatalf("stored user %q and reply %q, want both %q", user, reply, words)
		}

		// An error answers in the document's shape, decoded by the client.
		missing, err := c.GetSessionWithResponse(ctx, "01900000-0000-7000-8000-000000000000")
		if err != nil || missing.JSON404 == nil || missing.JSON404.Error.Code != apiclient.ErrorCodeNotFound {
			t.Fatalf("a missing session: %v %s", err, body(missing))
		}
	})
}

// body is a generated response's status, for a failure's message.
func body(r interface{ StatusCode() int }) string {
	if r == nil || reflect.ValueOf(r).IsNil() {
		return "(no response)"
	}
	return strconv.Itoa(r.StatusCode())
}
