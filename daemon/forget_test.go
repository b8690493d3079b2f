package daemon

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/sessions"
)

// copiesOf counts the rows, in every table that keeps a message's text
// outside the sessions' own, that still hold text.
func copiesOf(t *testing.T, d *Daemon, text string) map[string]int {
	t.Helper()
	ctx := context.Background()
	out := map[string]int{}
	for table, query := range map[string]string{
		"inbound.payload": `SELECT count(*) FROM inbound WHERE payload LIKE '%' || $1 || '%'`,
		"outbox.text":     `SELECT count(*) FROM outbox WHERE text LIKE '%' || $1 || '%'`,
		"messages":        `SELECT count(*) FROM messages WHERE content LIKE '%' || $1 || '%'`,
		"cron_runs":       `SELECT count(*) FROM cron_runs WHERE result LIKE '%' || $1 || '%'`,
	} {
		var n int
		if err := d.db.Read().QueryRowContext(ctx, query, text).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n > 0 {
			out[table] = n
		}
	}
	return out
}

// Deleting a session through the API, or pruning it, leaves no copy of
// its text: not in the inbound record kept to drop a redelivery, nor in
// the outbox; and a redelivered message is still dropped.
func TestDeletingASessionDeletesEveryCopy(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		tg := telegramtest.NewServer()
		defer tg.Close()
		d, url, stop := testDaemonOn(t, dbURL, "http:\n  tokens: [\""+reloadToken+"\"]\ngateway:\n  debounce: 0s\nadapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n"+
			indentYAML(tg.ConfigYAML(), "    "), configuredChannels(t))
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()

		const secret = "my locker code is 4711"
		first := telegramtest.Update{Message: &telegramtest.Message{MessageID: tg.NextMessageID("42"),
			From: &telegramtest.User{ID: 42, FirstName: "User"}, Chat: telegramtest.Chat{ID: 42, Type: "private", FirstName: "User"},
			Date: time.Now().Unix(), Text: secret}}
		tg.Inject(first)
		if _, err := tg.WaitSent(ctx, 1); err != nil {
			t.Fatal(err)
		}
		before := copiesOf(t, d, "4711")
		if before["inbound.payload"] == 0 || before["outbox.text"] == 0 || before["messages"] == 0 {
			t.Fatalf("before the delete, the text should be kept in inbound, outbox and messages: %v", before)
		}
		active, err := d.sessions.ActiveInChat(ctx, "telegram", "42")
		if err != nil || len(active) != 1 {
			t.Fatalf("the chat's session: %v %v", active, err)
		}
		req, _ := http.NewRequestWithContext(ctx, "DELETE", url+"/v1/sessions/"+string(active[0].ID), nil)
		req.Header.Set("Authorization", "Bearer "+reloadToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: status %d", resp.StatusCode)
		}
		if left := copiesOf(t, d, "4711"); len(left) > 0 {
			t.Fatalf("after DELETE, copies of the text are left: %v", left)
		}

		// The same update delivered again is still a duplicate.
		tg.Inject(first) // a new update id, the same message
		tg.InjectText(42, 42, "second message")
		sent, err := tg.WaitSent(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.Sent(); len(got) != 2 || strings.Contains(sent[1].Text, "4711") {
			t.Fatalf("after the delete, sent %+v: the redelivered message must be dropped", got)
		}

		// Pruning an archived session forgets its copies too.
		active, err = d.sessions.ActiveInChat(ctx, "telegram", "42")
		if err != nil || len(active) != 1 {
			t.Fatalf("the chat's new session: %v %v", active, err)
		}
		if _, err := d.sessions.Archive(ctx, active[0].ID, sessions.ReasonFinished); err != nil {
			t.Fatal(err)
		}
		if n := copiesOf(t, d, "second message"); n["outbox.text"] == 0 || n["inbound.payload"] == 0 {
			t.Fatalf("before the prune: %v", n)
		}
		if _, err := d.sessions.PruneArchived(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if left := copiesOf(t, d, "second message"); len(left) > 0 {
			t.Fatalf("after the prune, copies of the text are left: %v", left)
		}
	})
}
