package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/cluster"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/llm/llmtest"
)

// replicaProc is one `parley run` of the replica test.
type replicaProc struct {
	*parleyProcess
	port int
	url  string
	path string // its config file
}

const (
	replicaToken    = "replica-test-token-0123456789abcdefghij"
	replicaHookAuth = "replica-hook-secret-0123456789abcdefghijklmnop"
)

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startReplica runs `parley run` on config and waits for its /readyz;
// env is added to its environment.
func startReplica(t testing.TB, config string, port int, env ...string) *replicaProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &parleyProcess{tb: t, cmd: parleyCommand("run", "--config", path), output: newTailBuffer(), exited: make(chan struct{})}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.pid = strconv.Itoa(p.cmd.Process.Pid)
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	r := &replicaProc{parleyProcess: p, port: port, url: fmt.Sprintf("http://127.0.0.1:%d", port), path: path}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return r
			}
		}
		select {
		case <-p.exited:
			p.fatalf("parley exited before it was ready")
		default:
		}
		if time.Now().After(deadline) {
			p.fatalf("parley was not ready within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicaClient talks to the replicas' APIs.
type replicaClient struct {
	t    *testing.T
	http *http.Client
}

func (c replicaClient) do(method, url string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+replicaToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %v: %s", method, url, err, raw)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, nil
}

type storedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// messages reads a session's stored messages through a replica.
func (c replicaClient) messages(base, session string) ([]storedMessage, error) {
	var page struct {
		Messages []storedMessage `json:"messages"`
	}
	_, err := c.do("GET", base+"/v1/sessions/"+session+"/messages?limit=200", nil, &page)
	return page.Messages, err
}

// replicaChannels is what GET /v1/replicas at url says: each live
// replica's API address and the channels it runs.
func replicaChannels(c replicaClient, url string) (map[string][]string, error) {
	var out struct {
		Replicas []struct {
			APIURL   string   `json:"api_url"`
			Channels []string `json:"channels"`
		} `json:"replicas"`
	}
	if _, err := c.do("GET", url+"/v1/replicas", nil, &out); err != nil {
		return nil, err
	}
	m := map[string][]string{}
	for _, rep := range out.Replicas {
		m[rep.APIURL] = rep.Channels
	}
	return m, nil
}

// telegramHolder is the replica that runs the Telegram channel now, as
// the replicas report it (-1: none).
func telegramHolder(c replicaClient, live []*replicaProc) int {
	for _, r := range live {
		runs, err := replicaChannels(c, r.url)
		if err != nil {
			continue
		}
		for i, p := range live {
			if slices.Contains(runs[p.url], "tg-main") {
				return i
			}
		}
		return -1
	}
	return -1
}

// Three `parley run` replicas share one PostgreSQL. Telegram chats, API
// sessions and sync webhooks are spread over all three; the replica
// polling Telegram is SIGKILLed mid-burst, and the one that takes
// Telegram over is then SIGSTOPped past its lease and continued. Every
// message is answered once, by its own echo, in order; no session's
// turns overlap; a run on one replica is seen (status, events) and
// aborted from the others; exactly one replica polls the bot except
// while the stopped one is frozen mid-poll; and the channel fails over
// within 10 s of its holder's death.
func TestThreeReplicasOnOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three parley processes for a minute")
	}
	pgURL := dbtest.PostgresURL(t)
	tg := telegramtest.NewServer()
	defer tg.Close()
	slow := llmtest.NewOpenAIEcho(t, 20*time.Second)
	ports := []int{freePort(t), freePort(t), freePort(t)}
	config := func(port int) string {
		return "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"gateway:\n  debounce: 0s\n" +
			slow.ConfigYAML() +
			"agents:\n  - id: default\n    model: echo\n    queue_mode: followup\n" +
			"hooks:\n  - id: ci\n    auth: token\n    secret: \"" + replicaHookAuth + "\"\n    mode: sync\n    timeout: 30s\n    prompt: \"{{.text}}\"\n" +
			"adapters:\n  - id: tg-main\n    type: telegram\n    dm_policy: open\n" + indentYAML(tg.ConfigYAML(), "    ")
	}
	procs := make([]*replicaProc, 3)
	for i := range procs {
		// Each as if on a host of its own: a death is seen by its lapsed
		// heartbeat, not by its pid being gone.
		procs[i] = startReplica(t, config(ports[i]), ports[i], fmt.Sprintf("%s=host-%d", cluster.EnvHost, i))
	}
	c := replicaClient{t: t, http: &http.Client{Timeout: 15 * time.Second}}
	live := slices.Clone(procs)
	pick := func() *replicaProc { return live[rand.IntN(len(live))] }
	var liveMu sync.Mutex
	pickLive := func() *replicaProc {
		liveMu.Lock()
		defer liveMu.Unlock()
		return pick()
	}
	fail := func(format string, args ...any) {
		t.Helper()
		var b strings.Builder
		for i, p := range procs {
			fmt.Fprintf(&b, "\n--- replica %d (pid %s):\n%s", i, p.pid, p.output.String())
		}
		t.Fatalf(format+"%s", append(args, b.String())...)
	}

	// Each process is a replica of its own, whatever their host.
	var listed struct {
		Replicas []struct {
			ID string `json:"id"`
		} `json:"replicas"`
	}
	if _, err := c.do("GET", procs[1].url+"/v1/replicas", nil, &listed); err != nil {
		fail("GET /v1/replicas: %v", err)
	}
	ids := map[string]bool{}
	for _, r := range listed.Replicas {
		ids[r.ID] = true
	}
	if len(listed.Replicas) != 3 || len(ids) != 3 {
		fail("GET /v1/replicas lists %+v; want three distinct replicas", listed.Replicas)
	}

	// Wait for one replica to poll the bot.
	deadline := time.Now().Add(15 * time.Second)
	holder := -1
	for holder < 0 {
		if holder = telegramHolder(c, live); holder < 0 && time.Now().After(deadline) {
			fail("no replica runs the Telegram channel")
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Progress, until the test ends (a log after it would panic).
	progressDone := make(chan struct{})
	defer func() { cancel(); <-progressDone }()
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				t.Logf("progress: %d Telegram replies", tg.SentCount())
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
		cancel() // the others stop too, and say where they were
	}

	// Telegram: chats with two messages waiting at most, answered in order.
	// Long enough to still run after a failover and a freeze on a slow
	// machine: the load must outlast both (see "make it longer" below).
	const nChats, perChat = 6, 150
	for i := range nChats {
		chat := int64(7000 + i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < perChat; k++ {
				tg.InjectText(chat, chat, crashText(chat, k))
				// Wait for its answer (any copy) before the next.
				want := crashText(chat, k)
				for !sentTo(tg, chat, want) {
					if ctx.Err() != nil {
						report(fmt.Errorf("chat %d: no answer to %q", chat, want))
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}

	// API sessions: each message through a random replica, waiting for
	// its answer (read through another) before the next.
	const nSessions, perSession = 6, 20
	sessionIDs := make([]string, nSessions)
	for i := range sessionIDs {
		var s struct {
			ID string `json:"id"`
		}
		if _, err := c.do("POST", procs[i%3].url+"/v1/sessions", map[string]any{}, &s); err != nil {
			fail("create a session: %v", err)
		}
		sessionIDs[i] = s.ID
	}
	for i, id := range sessionIDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perSession {
				text := fmt.Sprintf("api %d message %d", i, k)
				for {
					_, err := c.do("POST", pickLive().url+"/v1/sessions/"+id+"/messages", map[string]string{"content": text}, nil)
					if err == nil {
						break
					}
					// A replica that died under the request: send again (the
					// session is then taken over); anything else fails.
					if ctx.Err() != nil {
						report(fmt.Errorf("session %d: send %q: %v", i, text, err))
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
				for {
					msgs, err := c.messages(pickLive().url, id)
					if err == nil && len(msgs) > 0 && msgs[len(msgs)-1].Role == "assistant" && msgs[len(msgs)-1].Content == text {
						break
					}
					if ctx.Err() != nil {
						report(fmt.Errorf("session %d: no answer to %q (last read: %v)", i, text, err))
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}

	// Sync webhooks, to random replicas: each answered with its own echo.
	var hooksAnswered sync.Map
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 10 {
				text := fmt.Sprintf("hook %d delivery %d", i, k)
				body, _ := json.Marshal(map[string]string{"text": text})
				for {
					req, _ := http.NewRequest("POST", pickLive().url+"/hooks/ci", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+replicaHookAuth)
					req.Header.Set("Content-Type", "application/json")
					resp, err := c.http.Do(req)
					if err != nil {
						if ctx.Err() != nil {
							report(fmt.Errorf("hook %q: %v", text, err))
							return
						}
						time.Sleep(200 * time.Millisecond)
						continue
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var out struct {
						Status, Reply string
					}
					_ = json.Unmarshal(raw, &out)
					if resp.StatusCode == http.StatusServiceUnavailable {
						time.Sleep(200 * time.Millisecond)
						continue
					}
					if resp.StatusCode != http.StatusOK || out.Status != "answered" || !strings.HasSuffix(out.Reply, text) {
						report(fmt.Errorf("sync hook %q: %d %s; want 200, answered with its echo", text, resp.StatusCode, raw))
						return
					}
					hooksAnswered.Store(text, true)
					break
				}
			}
		}()
	}

	// A run on one replica, seen and aborted from the others.
	slowSession := func() string {
		var s struct {
			ID string `json:"id"`
		}
		if _, err := c.do("POST", procs[0].url+"/v1/sessions", map[string]any{"model": "openai/gpt-test"}, &s); err != nil {
			fail("create a slow session: %v", err)
		}
		return s.ID
	}()
	events := openEvents(t, procs[1].url+"/v1/sessions/"+slowSession+"/events")
	if _, err := c.do("POST", procs[2].url+"/v1/sessions/"+slowSession+"/messages", map[string]string{"content": "take your time"}, nil); err != nil {
		fail("send to the slow session: %v", err)
	}
	var st struct {
		State string `json:"state"`
	}
	for st.State != "busy" {
		if _, err := c.do("GET", procs[0].url+"/v1/sessions/"+slowSession+"/status", nil, &st); err != nil {
			fail("status: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ab struct {
		Aborted bool `json:"aborted"`
	}
	if _, err := c.do("POST", procs[2].url+"/v1/sessions/"+slowSession+"/abort", nil, &ab); err != nil || !ab.Aborted {
		fail("abort: %v %+v", err, ab)
	}
	if !events.await("turn.finished", 10*time.Second) {
		fail("the event stream never said the aborted turn finished; it said:\n%s", events.text())
	}

	// Mid-burst, SIGKILL the replica polling Telegram.
	for tg.SentCount() < 40 {
		time.Sleep(20 * time.Millisecond)
	}
	killed := procs[holder]
	killedAt := time.Now()
	killed.kill()
	// The next replica to run the channel identifies the bot (getMe),
	// then polls.
	identified := tg.Calls("getMe")
	liveMu.Lock()
	live = slices.DeleteFunc(live, func(p *replicaProc) bool { return p == killed })
	liveMu.Unlock()
	for tg.Calls("getMe") <= identified {
		if time.Since(killedAt) > 15*time.Second {
			fail("nobody took Telegram over within 15s of its poller's death")
		}
		time.Sleep(20 * time.Millisecond)
	}
	polls := len(tg.Polls())
	for len(tg.Polls()) <= polls {
		time.Sleep(10 * time.Millisecond)
	}
	failover := time.Since(killedAt)
	t.Logf("Telegram failed over %s after its poller was killed", failover.Round(10*time.Millisecond))
	if failover > 10*time.Second {
		fail("Telegram failed over after %s; want within 10s", failover)
	}

	// The replica that took Telegram over is frozen past its lease.
	var frozen *replicaProc
	for frozen == nil {
		liveMu.Lock()
		if h := telegramHolder(c, live); h >= 0 {
			frozen = live[h]
		}
		liveMu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
	sent := tg.SentCount()
	for tg.SentCount() < sent+10 {
		if ctx.Err() != nil {
			fail("Telegram replies stalled after the failover: %d sent", tg.SentCount())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("10 more Telegram replies %s after the failover", time.Since(killedAt).Round(10*time.Millisecond))
	if tg.SentCount() >= nChats*perChat {
		t.Fatalf("the Telegram load ended before the freeze; make it longer")
	}
	stoppedAt := time.Now()
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	liveMu.Lock()
	live = slices.DeleteFunc(live, func(p *replicaProc) bool { return p == frozen })
	liveMu.Unlock()
	time.Sleep(9 * time.Second) // lease 5s, heartbeat 1s
	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-frozen.exited:
	case <-time.After(10 * time.Second):
		fail("the frozen replica went on after it was continued; want it to stop, fenced")
	}
	frozeEnd := time.Now()
	if frozen.waitErr == nil || !strings.Contains(frozen.output.String(), "lease lapsed") {
		fail("the frozen replica exited with %v; want an error saying its lease lapsed", frozen.waitErr)
	}

	wg.Wait()
	close(errs)
	var all []string
	for err := range errs {
		all = append(all, err.Error())
	}
	if len(all) > 0 {
		fail("%s", strings.Join(all, "\n"))
	}

	// What each chat saw: its own echoes, in order, once each. A reply a
	// lost replica had sent but not yet recorded is sent again by the
	// survivor, so it may come twice, right after itself. The sender has
	// at most one send in flight per chat (it claims a chat's oldest
	// reply only), and sends to several chats at once, so each lost
	// replica (the killed one and the frozen one) may repeat at most one
	// reply in each chat.
	const lost = 2
	repeats := 0
	for i := range nChats {
		chatRepeats := 0
		chat := int64(7000 + i)
		var got []string
		for _, m := range tg.Sent() {
			if m.ChatID == strconv.FormatInt(chat, 10) {
				got = append(got, m.Text)
			}
		}
		k := 0
		for _, text := range got {
			if k > 0 && text == crashText(chat, k-1) {
				repeats++
				chatRepeats++
				continue
			}
			if text != crashText(chat, k) {
				fail("chat %d's reply %d is %q; want %q", chat, k, text, crashText(chat, k))
			}
			k++
		}
		if k != perChat {
			fail("chat %d got %d answers; want %d", chat, k, perChat)
		}
		if chatRepeats > lost {
			fail("chat %d saw %d replies twice; at most the one send in flight to it that each of the %d lost replicas cut short may come twice", chat, chatRepeats, lost)
		}
	}
	if repeats > 0 {
		t.Logf("%d replies reached their chat twice (sends the lost replicas had made but not recorded)", repeats)
	}

	// The stored conversations: every session's turns one after another
	// (each user message stored after the previous answer), each
	// answered once by its echo.
	db, err := sql.Open("pgx", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkHistories(t, db, fail)

	// One poller at a time: Telegram refused a second concurrent
	// getUpdates only while the frozen replica held a poll open.
	for _, at := range tg.Conflicts() {
		if at.Before(stoppedAt) || at.After(frozeEnd) {
			fail("two replicas polled Telegram at once at %s (frozen from %s to %s)", at.Format(time.StampMilli),
				stoppedAt.Format(time.StampMilli), frozeEnd.Format(time.StampMilli))
		}
	}
	// The one left is the only live replica.
	cmd := parleyCommand("replicas", "--config", procs[0].path, "--json")
	out, err := cmd.Output()
	if err != nil {
		fail("parley replicas: %v: %s", err, out)
	}
	if err := json.Unmarshal(out, &listed); err != nil || len(listed.Replicas) != 1 {
		fail("parley replicas --json after a kill and a fence: %s (%v); want one replica", out, err)
	}
	n := 0
	hooksAnswered.Range(func(_, _ any) bool { n++; return true })
	if n != 30 {
		fail("%d sync webhooks answered; want 30", n)
	}
}

// sentTo reports whether the fake has sent text to chat.
func sentTo(tg *telegramtest.Server, chat int64, text string) bool {
	id := strconv.FormatInt(chat, 10)
	for _, m := range tg.Sent() {
		if m.ChatID == id && m.Text == text {
			return true
		}
	}
	return false
}

// checkHistories reads every session's stored messages and checks that
// user and assistant messages alternate, each answer the echo of its
// message, and that no turn began before the previous one ended.
func checkHistories(t *testing.T, db *sql.DB, fail func(string, ...any)) {
	t.Helper()
	rows, err := db.Query(`SELECT session_id, role, content, created_at FROM messages
		WHERE role IN ('user', 'assistant') ORDER BY session_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type msg struct {
		role, content string
		at            int64
	}
	bySession := map[string][]msg{}
	for rows.Next() {
		var sid string
		var m msg
		if err := rows.Scan(&sid, &m.role, &m.content, &m.at); err != nil {
			t.Fatal(err)
		}
		bySession[sid] = append(bySession[sid], m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	turns := 0
	for sid, msgs := range bySession {
		for i, m := range msgs {
			want := "user"
			if i%2 == 1 {
				want = "assistant"
			}
			if m.role != want {
				fail("session %s: message %d is %s %q; want %s (turns overlapped, or a message was answered twice)", sid, i, m.role, m.content, want)
			}
			if want == "assistant" && !strings.HasSuffix(msgs[i-1].content, m.content) && m.content != "" {
				fail("session %s: answer %q follows %q", sid, m.content, msgs[i-1].content)
			}
			if want == "user" && i > 0 && m.at < msgs[i-1].at {
				fail("session %s: message %d was stored at %d, before the previous answer (%d): turns overlapped", sid, i, m.at, msgs[i-1].at)
			}
			if want == "assistant" {
				turns++
			}
		}
		if len(msgs)%2 != 0 && !strings.Contains(msgs[len(msgs)-1].content, "take your time") {
			fail("session %s ends with an unanswered %q", sid, msgs[len(msgs)-1].content)
		}
	}
	t.Logf("%d sessions, %d turns checked", len(bySession), turns)
}

// eventStream is an SSE stream read in the background.
type eventStream struct {
	mu   sync.Mutex
	buf  strings.Builder
	more chan struct{}
}

func openEvents(t *testing.T, url string) *eventStream {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+replicaToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open the event stream: %v %v", err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	es := &eventStream{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			es.mu.Lock()
			es.buf.WriteString(sc.Text() + "\n")
			es.mu.Unlock()
			select {
			case es.more <- struct{}{}:
			default:
			}
		}
	}()
	return es
}

func (es *eventStream) text() string {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.buf.String()
}

func (es *eventStream) await(s string, within time.Duration) bool {
	deadline := time.After(within)
	for !strings.Contains(es.text(), s) {
		select {
		case <-es.more:
		case <-deadline:
			return false
		}
	}
	return true
}

// Channels are spread over the replicas: two Telegram bots and two
// replicas, each replica runs one bot once both are up, and the survivor
// runs both within 10 s of the other's death; each bot always has one
// poller.
func TestReplicasSpreadChannels(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two parley processes")
	}
	pgURL := dbtest.PostgresURL(t)
	bots := []*telegramtest.Server{telegramtest.NewServer(), telegramtest.NewServer()}
	for _, b := range bots {
		defer b.Close()
	}
	config := func(port int) string {
		return "database:\n  url: \"" + pgURL + "\"\n" +
			"http:\n  listen: 127.0.0.1:" + strconv.Itoa(port) + "\n  tokens: [\"" + replicaToken + "\"]\n" +
			"agents:\n  - id: default\n    model: echo\n" +
			"adapters:\n  - id: tg-one\n    type: telegram\n    dm_policy: open\n" + indentYAML(bots[0].ConfigYAML(), "    ") +
			"  - id: tg-two\n    type: telegram\n    dm_policy: open\n" + indentYAML(bots[1].ConfigYAML(), "    ")
	}
	c := replicaClient{http: &http.Client{Timeout: 15 * time.Second}}
	runs := func(r *replicaProc) map[string][]string {
		m, err := replicaChannels(c, r.url)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	pa, pb := freePort(t), freePort(t)
	a := startReplica(t, config(pa), pa)
	waitFor := func(what string, within time.Duration, ok func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok() {
			if time.Since(start) > within {
				t.Fatalf("%s: not within %s; the replicas run %v\n%s", what, within, runs(a), a.output.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitFor("the first replica runs both bots", 10*time.Second, func() bool { return len(runs(a)[a.url]) == 2 })
	b := startReplica(t, config(pb), pb)
	waitFor("each replica runs one bot", 15*time.Second, func() bool {
		m := runs(a)
		return len(m[a.url]) == 1 && len(m[b.url]) == 1
	})
	// The dashboard's replicas page shows both, and the bot each holds.
	req, _ := http.NewRequest("GET", a.url+"/admin/replicas", nil)
	req.Header.Set("Authorization", "Bearer "+replicaToken)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Count(string(page), `<tr class="replica">`) != 2 || strings.Count(string(page), "(this one)") != 1 ||
		!strings.Contains(string(page), `<td class="held">tg-one</td>`) || !strings.Contains(string(page), `<td class="held">tg-two</td>`) {
		t.Fatalf("the dashboard's replicas page: %d\n%s", resp.StatusCode, page)
	}
	// Each replica is ready, not degraded, by the bot it stands by for.
	for _, r := range []*replicaProc{a, b} {
		var ready struct {
			Status   string            `json:"status"`
			Channels map[string]string `json:"channels"`
		}
		waitFor("each replica ready, standing by for the other's bot", 10*time.Second, func() bool {
			resp, err := http.Get(r.url + "/readyz")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if json.NewDecoder(resp.Body).Decode(&ready) != nil {
				return false
			}
			standby := 0
			for _, st := range ready.Channels {
				if strings.HasPrefix(st, "standby") {
					standby++
				}
			}
			return ready.Status == "ready" && standby == 1
		})
	}
	// Each bot answers through whichever replica runs it.
	for i, bot := range bots {
		bot.InjectText(int64(100+i), int64(100+i), fmt.Sprintf("to bot %d", i))
	}
	waitFor("both bots answer", 10*time.Second, func() bool {
		return sentTo(bots[0], 100, "to bot 0") && sentTo(bots[1], 101, "to bot 1")
	})
	killedAt := time.Now()
	b.kill()
	took := waitFor("the survivor runs both bots", 10*time.Second, func() bool { return len(runs(a)[a.url]) == 2 })
	t.Logf("the survivor ran both bots %s after the other replica was killed", (time.Since(killedAt)).Round(10*time.Millisecond))
	_ = took
	for i, bot := range bots {
		bot.InjectText(int64(100+i), int64(100+i), fmt.Sprintf("again to bot %d", i))
	}
	waitFor("both bots answer after the failover", 10*time.Second, func() bool {
		return sentTo(bots[0], 100, "again to bot 0") && sentTo(bots[1], 101, "again to bot 1")
	})
	for i, bot := range bots {
		if n := len(bot.Conflicts()); n > 0 {
			t.Errorf("bot %d had two pollers at once %d times", i, n)
		}
	}
}
