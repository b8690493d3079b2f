package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/llmtest"
)

// startThree starts three replicas with config(port), each as if on a
// host of its own (a death is seen by its lapsed heartbeat).
func startThree(t *testing.T, config func(port int) string) []*replicaProc {
	t.Helper()
	procs := make([]*replicaProc, 3)
	for i := range procs {
		port := freePort(t)
		procs[i] = startReplica(t, config(port), port, fmt.Sprintf("%s=host-%d", cluster.EnvHost, i))
	}
	return procs
}

// replicaIDs maps each replica's API address to its replica id.
func replicaIDs(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT instance, api_url FROM replicas WHERE fenced_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, u string
		if err := rows.Scan(&id, &u); err != nil {
			t.Fatal(err)
		}
		out[u] = id
	}
	return out
}

// procByID is the replica whose id is id.
func procByID(t *testing.T, db *sql.DB, procs []*replicaProc, id string) *replicaProc {
	t.Helper()
	ids := replicaIDs(t, db)
	for _, p := range procs {
		if ids[p.url] == id {
			return p
		}
	}
	t.Fatalf("no replica has id %s (%v)", id, ids)
	return nil
}

// dumpAll is every replica's output, for a failure's message.
func dumpAll(procs []*replicaProc) string {
	var b strings.Builder
	for i, p := range procs {
		fmt.Fprintf(&b, "\n--- replica %d (pid %s):\n%s", i, p.pid, p.output.String())
	}
	return b.String()
}

// sendUntilTaken posts content to the session through a random live
// replica until one takes it (a replica that died under the request, or
// answered 503, is tried again).
func sendUntilTaken(t *testing.T, c replicaClient, live func() []*replicaProc, session, content string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ps := live()
		_, err := c.do("POST", ps[rand.IntN(len(ps))].url+"/v1/sessions/"+session+"/messages", map[string]string{"content": content}, nil)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("send %q: %v", content, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A replica is SIGKILLed in the middle of a session's turn, with newer
// messages of the session queued behind it and more arriving while it is
// dead: every message is answered, once, by its own echo, in the order
// they were sent.
func TestReplicaKilledMidTurnWithMessagesQueued(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three parley processes")
	}
	pgURL := dbtest.PostgresURL(t)
	slow := llmtest.NewOpenAIEcho(t, 1500*time.Millisecond)
	procs := startThree(t, func(port int) string {
		return "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n" + slow.ConfigYAML() +
			"agents:\n  - id: default\n    model: openai/gpt-test\n    queue_mode: followup\n"
	})
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := replicaClient{t: t, http: &http.Client{Timeout: 15 * time.Second}}
	var mu sync.Mutex
	live := slices.Clone(procs)
	liveNow := func() []*replicaProc { mu.Lock(); defer mu.Unlock(); return slices.Clone(live) }

	var s struct {
		ID string `json:"id"`
	}
	if _, err := c.do("POST", procs[0].url+"/v1/sessions", map[string]any{}, &s); err != nil {
		t.Fatal(err)
	}
	text := func(k int) string { return fmt.Sprintf("message %d in order", k) }
	sendUntilTaken(t, c, liveNow, s.ID, text(0), 10*time.Second)
	var st struct {
		State string `json:"state"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.State != "busy" {
		if _, err := c.do("GET", procs[1].url+"/v1/sessions/"+s.ID+"/status", nil, &st); err != nil || time.Now().After(deadline) {
			t.Fatalf("the first turn never showed busy: %v %q", err, st.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for k := 1; k <= 3; k++ {
		sendUntilTaken(t, c, liveNow, s.ID, text(k), 10*time.Second)
	}
	var holder string
	if err := db.QueryRow(`SELECT instance FROM holds WHERE name LIKE 'lane:%'`).Scan(&holder); err != nil {
		t.Fatalf("the session's holder: %v", err)
	}
	victim := procByID(t, db, procs, holder)
	victim.kill()
	mu.Lock()
	live = slices.DeleteFunc(live, func(p *replicaProc) bool { return p == victim })
	mu.Unlock()
	killedAt := time.Now()
	for k := 4; k <= 5; k++ {
		sendUntilTaken(t, c, liveNow, s.ID, text(k), 20*time.Second)
	}

	const n = 6
	var msgs []storedMessage
	for {
		msgs, err = c.messages(liveNow()[0].url, s.ID)
		if err == nil && len(msgs) >= 2*n {
			break
		}
		if time.Since(killedAt) > 60*time.Second {
			t.Fatalf("after the kill, %d messages stored (%v); want %d, each answered%s", len(msgs), err, 2*n, dumpAll(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("all %d answered %s after the kill", n, time.Since(killedAt).Round(10*time.Millisecond))
	var got []string
	for _, m := range msgs {
		got = append(got, m.Role+":"+m.Content)
	}
	var want []string
	for k := range n {
		want = append(want, "user:"+text(k), "assistant:"+text(k))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the session's history:\n%s\nwant:\n%s%s", strings.Join(got, "\n"), strings.Join(want, "\n"), dumpAll(procs))
	}
}

// fenceLockHeld reports whether replica id has a write transaction open
// (its fence lock held shared, parley_fence).
func fenceLockHeld(t *testing.T, db *sql.DB, id string) bool {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1885434465 AND objsubid = 2
		AND objid = ((hashtext($1)::BIGINT + 4294967296) % 4294967296)::OID AND granted`, id).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// A replica is SIGSTOPped inside a write transaction, under load that
// passes messages between the replicas: it is fenced, and its sessions
// answered elsewhere, within 10 s; no healthy replica is fenced; and it
// stops, fenced, once continued.
func TestReplicaStoppedInsideATransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three parley processes")
	}
	pgURL := dbtest.PostgresURL(t)
	procs := startThree(t, func(port int) string {
		return "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n" +
			"agents:\n  - id: default\n    model: echo\n    queue_mode: followup\n"
	})
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := replicaClient{t: t, http: &http.Client{Timeout: 15 * time.Second}}
	ids := replicaIDs(t, db)
	victim := procs[2]
	var mu sync.Mutex
	live := slices.Clone(procs)
	liveNow := func() []*replicaProc { mu.Lock(); defer mu.Unlock(); return slices.Clone(live) }

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	const nSessions = 8
	for i := range nSessions {
		var s struct {
			ID string `json:"id"`
		}
		if _, err := c.do("POST", procs[i%3].url+"/v1/sessions", map[string]any{}, &s); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At most 90 turns: the check below reads a session's first
			// 200 messages.
			for k := 0; k < 90; k++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				content := fmt.Sprintf("session %d message %d", i, k)
				for {
					ps := liveNow()
					if _, err := c.do("POST", ps[rand.IntN(len(ps))].url+"/v1/sessions/"+s.ID+"/messages", map[string]string{"content": content}, nil); err == nil {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("session %d: %q never taken", i, content)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				for {
					ps := liveNow()
					msgs, err := c.messages(ps[rand.IntN(len(ps))].url, s.ID)
					if err == nil && len(msgs) > 0 && msgs[len(msgs)-1].Role == "assistant" && msgs[len(msgs)-1].Content == content {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("session %d: no answer to %q (last read: %v); stored: %s", i, content, err, inboundOf(t, pgURL, content))
						return
					}
					time.Sleep(30 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)

	// Stop the victim until it is caught inside a write transaction.
	caught := false
	var stoppedAt time.Time
	for try := 0; try < 300 && !caught; try++ {
		if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stoppedAt = time.Now()
		time.Sleep(30 * time.Millisecond)
		if fenceLockHeld(t, db, ids[victim.url]) {
			caught = true
			break
		}
		_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
	if !caught {
		t.Fatal("never caught the replica inside a write transaction in 300 tries")
	}
	mu.Lock()
	live = slices.DeleteFunc(live, func(p *replicaProc) bool { return p == victim })
	mu.Unlock()
	for {
		var fenced bool
		if err := db.QueryRow(`SELECT fenced_at IS NOT NULL FROM replicas WHERE instance = $1`, ids[victim.url]).Scan(&fenced); err != nil {
			t.Fatal(err)
		}
		if fenced {
			break
		}
		if time.Since(stoppedAt) > 10*time.Second {
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
			t.Fatalf("the replica stopped inside a transaction was not fenced within 10s%s", dumpAll(procs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("fenced %s after it was stopped inside a transaction", time.Since(stoppedAt).Round(10*time.Millisecond))
	// The load goes on through the others for a while.
	time.Sleep(5 * time.Second)
	close(stopLoad)
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Errorf("%v", err)
		failed = true
	}
	if failed {
		t.Fatalf("messages unanswered%s", dumpAll(procs))
	}
	for _, p := range procs[:2] {
		var fenced bool
		if err := db.QueryRow(`SELECT fenced_at IS NOT NULL FROM replicas WHERE instance = $1`, ids[p.url]).Scan(&fenced); err != nil || fenced {
			t.Fatalf("a healthy replica (%s) was fenced: %v %v%s", p.url, fenced, err, dumpAll(procs))
		}
		select {
		case <-p.exited:
			t.Fatalf("a healthy replica exited%s", dumpAll(procs))
		default:
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-victim.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the fenced replica went on after it was continued%s", dumpAll(procs))
	}
	checkHistories(t, db, func(format string, args ...any) { t.Fatalf(format+"%s", append(args, dumpAll(procs))...) })
}

// PostgreSQL freezes for 6 s (nothing fails, nothing answers) under
// Telegram load on three replicas: nobody is fenced, and no message waits
// for its reply more than 10 s after the database returns.
func TestReplicasThroughADatabaseFreeze(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three parley processes and freezes their database")
	}
	pgURL := dbtest.PostgresURL(t)
	proxy := dbtest.NewProxy(t, "127.0.0.1:5432")
	tg := telegramtest.NewServer()
	defer tg.Close()
	procs := startThree(t, func(port int) string {
		return "database:\n  url: \"" + proxy.Via(t, pgURL) + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n" +
			"agents:\n  - id: default\n    model: echo\n    queue_mode: followup\n" +
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	})
	c := replicaClient{t: t, http: &http.Client{Timeout: 15 * time.Second}}
	deadline := time.Now().Add(15 * time.Second)
	for telegramHolder(c, procs) < 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no replica runs the Telegram channel%s", dumpAll(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Each chat sends its next message once the last is answered, and
	// notes when each was sent and answered.
	type exchange struct {
		text           string
		sent, answered time.Time
	}
	var mu sync.Mutex
	var log []*exchange
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const nChats = 3
	for i := range nChats {
		chat := int64(8000 + i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				x := &exchange{text: crashText(chat, k), sent: time.Now()}
				mu.Lock()
				log = append(log, x)
				mu.Unlock()
				tg.InjectText(chat, chat, x.text)
				for !sentTo(tg, chat, x.text) {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
				mu.Lock()
				x.answered = time.Now()
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second)
	proxy.Freeze()
	frozeAt := time.Now()
	time.Sleep(6 * time.Second)
	proxy.Restore()
	back := time.Now()
	time.Sleep(15 * time.Second)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	worst := time.Duration(0)
	for _, x := range log {
		from := x.sent
		if from.Before(back) {
			from = back
		}
		if x.answered.IsZero() {
			if x.sent.After(back.Add(5 * time.Second)) {
				continue // sent at the very end
			}
			t.Fatalf("%q (sent %s after the freeze began) was never answered; stored: %s%s", x.text, x.sent.Sub(frozeAt).Round(time.Millisecond),
				inboundOf(t, pgURL, x.text), dumpAll(procs))
		}
		if wait := x.answered.Sub(from); wait > worst {
			worst = wait
		}
	}
	t.Logf("%d messages; the longest wait for a reply after the database returned: %s", len(log), worst.Round(10*time.Millisecond))
	if worst > 10*time.Second {
		t.Fatalf("a reply waited %s after the database returned; want at most 10s%s", worst, dumpAll(procs))
	}
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var fenced int
	if err := db.QueryRow(`SELECT COUNT(*) FROM replicas WHERE fenced_at IS NOT NULL AND NOT recovered`).Scan(&fenced); err != nil || fenced != 0 {
		t.Fatalf("%d replicas fenced through a 6 s freeze (%v); want none%s", fenced, err, dumpAll(procs))
	}
}

// inboundOf describes the stored inbound records and outbox rows of the
// message text, for a failure's message.
func inboundOf(t *testing.T, pgURL, text string) string {
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	var b strings.Builder
	rows, err := db.Query(`SELECT i.id, i.status, i.owner, COALESCE(i.lane, ''), i.error,
		COALESCE((SELECT string_agg(o.status || '/' || o.attempts || '/' || o.lease_until || '/' || o.claim_owner, ',') FROM outbox o WHERE o.inbound_id = i.id), '')
		FROM inbound i WHERE i.payload LIKE '%' || $1 || '%'`, text)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, owner, lane, errText, outbox string
		if err := rows.Scan(&id, &status, &owner, &lane, &errText, &outbox); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "[inbound %s %s owner %s lane %q error %q outbox %s]", id, status, owner, lane, errText, outbox)
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}
