package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/echo"
	"github.com/parleyd/parley/sessions"
)

// Aborting mid-stream keeps exactly what was streamed: the stored assistant
// message is the text of the deltas sent before the abort, a strict prefix
// of the full echo, and the session goes back to idle.
func TestAbortMidStreamKeepsTruthfulPartial(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newAgentEnv(t, open, echo.New(echo.WithDelay(20*time.Millisecond)))
		sess := e.createSession(t, `{"title":"abort"}`)
		// Subscribed before the send, so the stream starts with this run.
		c := e.stream(t, sess.ID, "", nil)

		full := strings.TrimSpace(strings.Repeat("one two three four five six seven eight nine ten ", 10))
		body, _ := json.Marshal(map[string]string{"content": full})
		r := e.do(t, "POST", "/v1/sessions/"+string(sess.ID)+"/messages", string(body))
		if r.status != http.StatusAccepted {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		var sent api.SendMessageResponse
		r.decode(t, &sent)

		var streamed strings.Builder
		deltas, aborted := 0, false
		var fin api.TurnFinishedData
		for {
			ev := c.next(t)
			if ev.RunID != sent.RunID {
				t.Fatalf("event %s of run %s, want run %s", ev.Type, ev.RunID, sent.RunID)
			}
			switch ev.Type {
			case api.TypeMessageDelta:
				var d api.DeltaData
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				streamed.WriteString(d.Text)
				if deltas++; deltas == 3 && !aborted {
					aborted = true
					if r := e.do(t, "POST", "/v1/sessions/"+string(sess.ID)+"/abort", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"aborted":true`) {
						t.Fatalf("abort: %d %s", r.status, r.body)
					}
				}
			case api.TypeTurnFinished:
				if err := json.Unmarshal(ev.Data, &fin); err != nil {
					t.Fatal(err)
				}
			}
			if ev.Type == api.TypeTurnFinished {
				break
			}
		}
		if !aborted || !fin.Aborted {
			t.Fatalf("aborted %v, turn.finished %+v", aborted, fin)
		}

		r = e.do(t, "GET", "/v1/sessions/"+string(sess.ID)+"/messages", "")
		var page api.MessagesPage
		r.decode(t, &page)
		var roles []sessions.Role
		for _, m := range page.Messages {
			roles = append(roles, m.Role)
		}
		if len(page.Messages) != 2 || roles[0] != sessions.RoleUser || roles[1] != sessions.RoleAssistant {
			t.Fatalf("messages %v: %s", roles, r.body)
		}
		partial := page.Messages[1].Content
		switch {
		case partial == "" || partial == full || !strings.HasPrefix(full, partial):
			t.Fatalf("partial %q is not a strict prefix of the echo", partial)
		case partial != streamed.String():
			t.Fatalf("stored partial %q, streamed %q", partial, streamed.String())
		}

		r = e.do(t, "GET", "/v1/sessions/"+string(sess.ID)+"/status", "")
		var st api.Status
		r.decode(t, &st)
		if r.status != http.StatusOK || st.State != api.StateIdle {
			t.Fatalf("status after the abort: %d %s", r.status, r.body)
		}
		// Nothing left to abort.
		if r := e.do(t, "POST", "/v1/sessions/"+string(sess.ID)+"/abort", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), `"aborted":false`) {
			t.Fatalf("second abort: %d %s", r.status, r.body)
		}
	})
}
