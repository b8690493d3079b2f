// Package discordtest is a fake Discord for tests: an HTTP server that
// speaks the parts of the REST API a bot uses to talk (gateway discovery,
// create, edit, typing and its own reactions), and a websocket gateway that speaks the
// handshake (Hello, Identify, Ready, heartbeats and their acks), resumes
// (op 6, replaying what was missed, then RESUMED) and dispatches events.
//
// Point the discord adapter's api_url at URL(); the gateway is found
// through GET /api/v9/gateway as on Discord, or set gateway_url to
// GatewayURL(). Call WaitReady before dispatching: as on Discord, events
// dispatched while no session is connected are only replayed on a resume.
package discordtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Options configures a fake.
type Options struct {
	// Token is the bot token the fake accepts, without "Bot "; it defaults
	// to DefaultToken.
	Token string
	// Bot is the bot's user, sent in READY and as the author of what it
	// sends; it defaults to DefaultBotID / "parley".
	Bot User
	// HeartbeatInterval is sent in Hello; it defaults to Discord's 41.25s.
	HeartbeatInterval time.Duration
}

// Defaults.
const (
	DefaultToken             = "fake.discord-bot.token"
	DefaultBotID             = "1100000000000000001"
	DefaultHeartbeatInterval = 41250 * time.Millisecond
	// MaxContent is Discord's limit on a message's content, in characters.
	MaxContent = 2000
)

// Server is a fake Discord. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	http *httptest.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change, for waits
	conns   map[*gwConn]bool
	live    *gwConn // the connection dispatches go to, once READY or RESUMED
	closing sync.WaitGroup
	closed  bool

	sessions   int
	sessionID  string
	expired    int // close code for resumes of an expired session; 0: op 9
	seq        int64
	events     []event // this session's dispatches, for replay on resume
	identifies []Identify
	resumes    []Resume
	heartbeats int
	readies    int

	nextID     int64
	sent       []SentMessage
	messages   map[string]*Message // what the bot sent, by id
	nonces     map[string]*Message // channel + nonce → the message it made
	edits      []Edit
	typing     []string
	requests   []Request
	files      map[string]file // attachments on the fake CDN, by URL path
	rateLimits []time.Duration // the next requests' 429s
	failures   []int           // the next requests' error statuses

	reactions    map[string][]string // channel/message → the bot's reactions
	reactionLog  []Reaction
	interactions map[string]string // dispatched interaction id → its token, until answered
	responses    []InteractionResponse
}

type file struct {
	contentType string
	data        []byte
}

type gwConn struct {
	c *websocket.Conn
}

type event struct {
	seq  int64
	name string
	data json.RawMessage
}

// payload is a gateway frame.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// NewServer starts a fake, closed when the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.Bot.ID == "" {
		opts.Bot.ID = DefaultBotID
	}
	if opts.Bot.Username == "" {
		opts.Bot.Username = "parley"
	}
	if opts.Bot.Discriminator == "" {
		opts.Bot.Discriminator = "0"
	}
	opts.Bot.Bot = true
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	s := &Server{
		opts:     opts,
		changed:  make(chan struct{}),
		conns:    map[*gwConn]bool{},
		nextID:   1300000000000000000,
		messages: map[string]*Message{},
		nonces:   map[string]*Message{},
		files:    map[string]file{},

		interactions: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/gateway", s.serveGateway)
	mux.HandleFunc("/gateway/", s.serveGateway)
	mux.HandleFunc("GET /api/{v}/gateway", s.rest(false, s.getGateway))
	mux.HandleFunc("GET /api/{v}/gateway/bot", s.rest(true, s.getGatewayBot))
	mux.HandleFunc("GET /api/{v}/users/@me", s.rest(true, s.getMe))
	mux.HandleFunc("POST /api/{v}/channels/{channel}/messages", s.rest(true, s.createMessage))
	mux.HandleFunc("PATCH /api/{v}/channels/{channel}/messages/{message}", s.rest(true, s.editMessage))
	mux.HandleFunc("POST /api/{v}/channels/{channel}/typing", s.rest(true, s.triggerTyping))
	mux.HandleFunc("PUT /api/{v}/channels/{channel}/messages/{message}/reactions/{emoji}/@me", s.rest(true, s.react))
	mux.HandleFunc("DELETE /api/{v}/channels/{channel}/messages/{message}/reactions/{emoji}/@me", s.rest(true, s.react))
	mux.HandleFunc("POST /api/{v}/interactions/{id}/{token}/callback", s.rest(false, s.interactionCallback))
	mux.HandleFunc("GET /attachments/{channel}/{id}/{name}", s.getAttachment)
	mux.HandleFunc("/", s.rest(true, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, 0, "404: Not Found")
	}))
	s.http = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// URL is the fake's base address, for the adapter's api_url; the REST API
// is under /api/v9/ as on discord.com.
func (s *Server) URL() string { return s.http.URL }

// GatewayURL is the websocket gateway's address, for gateway_url.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.http.URL, "http") + "/gateway"
}

// Token is the bot token the fake accepts.
func (s *Server) Token() string { return s.opts.Token }

// Bot is the bot's user.
func (s *Server) Bot() User { return s.opts.Bot }

// Close stops the fake, dropping any gateway connection.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for c := range s.conns {
		_ = c.c.CloseNow()
	}
	s.live = nil
	s.notifyLocked()
	s.mu.Unlock()
	s.closing.Wait()
	s.http.Close()
}

// notifyLocked wakes the waits; s.mu is held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait waits until cond, checked with s.mu held, or ctx ends.
func (s *Server) wait(ctx context.Context, what string, cond func() bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.mu.Lock()
			return fmt.Errorf("discordtest: waiting for %s: %w", what, ctx.Err())
		case <-ch:
		}
		s.mu.Lock()
	}
	return nil
}

// ---- gateway ----

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	gc := &gwConn{c: c}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.CloseNow()
		return
	}
	s.conns[gc] = true
	s.closing.Add(1)
	s.mu.Unlock()
	defer func() {
		_ = c.CloseNow()
		s.mu.Lock()
		delete(s.conns, gc)
		if s.live == gc {
			s.live = nil
		}
		s.notifyLocked()
		s.mu.Unlock()
		s.closing.Done()
	}()

	ctx := context.WithoutCancel(r.Context())
	hello, _ := json.Marshal(map[string]any{"heartbeat_interval": s.opts.HeartbeatInterval.Milliseconds()})
	if err := write(ctx, c, payload{Op: 10, D: hello}); err != nil {
		return
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var p payload
		if err := json.Unmarshal(data, &p); err != nil {
			_ = c.Close(4002, "Error while decoding payload.")
			return
		}
		switch p.Op {
		case 1: // heartbeat
			s.mu.Lock()
			s.heartbeats++
			err = write(ctx, c, payload{Op: 11})
			s.notifyLocked()
			s.mu.Unlock()
		case 2:
			err = s.identify(ctx, gc, p.D)
		case 6:
			err = s.resume(ctx, gc, p.D)
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) tokenOK(tok string) bool {
	return tok == s.opts.Token || tok == "Bot "+s.opts.Token
}

var errClosed = fmt.Errorf("closed")

func (s *Server) identify(ctx context.Context, gc *gwConn, d json.RawMessage) error {
	var id Identify
	if err := json.Unmarshal(d, &id); err != nil {
		_ = gc.c.Close(4002, "Error while decoding payload.")
		return errClosed
	}
	s.mu.Lock()
	s.identifies = append(s.identifies, id)
	s.notifyLocked()
	if !s.tokenOK(id.Token) {
		s.mu.Unlock()
		_ = gc.c.Close(4004, "Authentication failed.")
		return errClosed
	}
	defer s.mu.Unlock()
	s.sessions++
	s.sessionID = fmt.Sprintf("fake-session-%d", s.sessions)
	s.expired = 0
	s.seq, s.events = 0, nil
	s.live = gc
	ready := map[string]any{
		"v":                  9,
		"user":               s.opts.Bot,
		"session_id":         s.sessionID,
		"resume_gateway_url": s.GatewayURL(),
		"guilds":             []any{},
		"application":        map[string]any{"id": s.opts.Bot.ID, "flags": 0},
	}
	if id.Shard != nil {
		ready["shard"] = id.Shard
	}
	raw, _ := json.Marshal(ready)
	s.readies++
	return s.dispatchLocked(ctx, "READY", raw)
}

func (s *Server) resume(ctx context.Context, gc *gwConn, d json.RawMessage) error {
	var rs Resume
	if err := json.Unmarshal(d, &rs); err != nil {
		_ = gc.c.Close(4002, "Error while decoding payload.")
		return errClosed
	}
	s.mu.Lock()
	s.resumes = append(s.resumes, rs)
	s.notifyLocked()
	if !s.tokenOK(rs.Token) {
		s.mu.Unlock()
		_ = gc.c.Close(4004, "Authentication failed.")
		return errClosed
	}
	if code := s.expired; code != 0 {
		s.mu.Unlock()
		_ = gc.c.Close(websocket.StatusCode(code), "Session timed out.")
		return errClosed
	}
	defer s.mu.Unlock()
	if rs.SessionID == "" || rs.SessionID != s.sessionID || rs.Seq > s.seq {
		return write(ctx, gc.c, payload{Op: 9, D: json.RawMessage("false")}) // invalid session
	}
	for _, e := range s.events {
		if e.seq > rs.Seq {
			if err := writeEvent(ctx, gc.c, e); err != nil {
				return err
			}
		}
	}
	s.live = gc
	return s.dispatchLocked(ctx, "RESUMED", json.RawMessage("{}"))
}

// dispatchLocked numbers an event, keeps it for resumes, and sends it to
// the live connection if there is one; s.mu is held.
func (s *Server) dispatchLocked(ctx context.Context, name string, data json.RawMessage) error {
	s.seq++
	e := event{seq: s.seq, name: name, data: data}
	s.events = append(s.events, e)
	s.notifyLocked()
	if s.live == nil {
		return nil
	}
	return writeEvent(ctx, s.live.c, e)
}

func writeEvent(ctx context.Context, c *websocket.Conn, e event) error {
	seq, name := e.seq, e.name
	return write(ctx, c, payload{Op: 0, D: e.data, S: &seq, T: &name})
}

func write(ctx context.Context, c *websocket.Conn, p payload) error {
	if p.D == nil {
		p.D = json.RawMessage("null")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

// Dispatch sends an event (op 0) with the next sequence number and returns
// that number. With no session connected it is kept for a resume only.
func (s *Server) Dispatch(name string, data any) int64 {
	raw, err := json.Marshal(data)
	if err != nil {
		panic("discordtest: Dispatch " + name + ": " + err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.dispatchLocked(context.Background(), name, raw)
	return s.seq
}

// DispatchMessage sends m as MESSAGE_CREATE, filling in an id, the time
// and the type (a reply when it has a message_reference) if unset, and
// returns it as sent.
func (s *Server) DispatchMessage(m Message) Message {
	if m.ID == "" {
		m.ID = s.NewID()
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = time.Now().UTC().Truncate(time.Millisecond)
	}
	if m.Type == TypeDefault && m.MessageReference != nil && m.MessageReference.Type == 0 {
		m.Type = TypeReply
	}
	if m.Author.Discriminator == "" {
		m.Author.Discriminator = "0"
	}
	if m.Mentions == nil {
		m.Mentions = []User{}
	}
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	if m.MentionRoles == nil {
		m.MentionRoles = []string{}
	}
	if m.Embeds == nil {
		m.Embeds = []any{}
	}
	s.Dispatch("MESSAGE_CREATE", m)
	return m
}

// NewID returns a fresh snowflake-like id.
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

func (s *Server) newIDLocked() string {
	s.nextID++
	return strconv.FormatInt(s.nextID, 10)
}

// Drop cuts the live gateway connection without a close frame, as a
// network failure would. It reports whether there was one.
func (s *Server) Drop() bool {
	s.mu.Lock()
	gc := s.live
	s.live = nil
	s.mu.Unlock()
	if gc == nil {
		return false
	}
	_ = gc.c.CloseNow()
	return true
}

// CloseGateway closes the live gateway connection with a close code, e.g.
// 4000 (unknown error, resumable) or 4004 (authentication failed). It
// reports whether there was one.
func (s *Server) CloseGateway(code int, reason string) bool {
	s.mu.Lock()
	gc := s.live
	s.live = nil
	s.mu.Unlock()
	if gc == nil {
		return false
	}
	_ = gc.c.Close(websocket.StatusCode(code), reason)
	return true
}

// InvalidateSession forgets the current session, so the next RESUME is
// answered with op 9 (invalid session) and the client must identify anew.
func (s *Server) InvalidateSession() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionID = ""
	s.notifyLocked()
}

// ExpireSession forgets the current session, and answers every RESUME
// until the next IDENTIFY by closing the connection with code (4009
// session timed out, or 4007 invalid seq).
func (s *Server) ExpireSession(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessionID = ""
	s.expired = code
	s.notifyLocked()
}

// WaitReady waits until a session is connected: READY or RESUMED sent.
func (s *Server) WaitReady(ctx context.Context) error {
	return s.wait(ctx, "a connected session", func() bool { return s.live != nil })
}

// WaitResumes waits until the client has sent n RESUMEs, and returns them.
func (s *Server) WaitResumes(ctx context.Context, n int) ([]Resume, error) {
	err := s.wait(ctx, fmt.Sprintf("%d resumes", n), func() bool { return len(s.resumes) >= n })
	return s.Resumes(), err
}

// WaitIdentifies waits until the client has sent n IDENTIFYs, and returns
// them.
func (s *Server) WaitIdentifies(ctx context.Context, n int) ([]Identify, error) {
	err := s.wait(ctx, fmt.Sprintf("%d identifies", n), func() bool { return len(s.identifies) >= n })
	return s.Identifies(), err
}

// WaitHeartbeats waits until the client has sent n heartbeats (each one
// acked with op 11).
func (s *Server) WaitHeartbeats(ctx context.Context, n int) error {
	return s.wait(ctx, fmt.Sprintf("%d heartbeats", n), func() bool { return s.heartbeats >= n })
}

// WaitSent waits until n messages were sent, and returns them.
func (s *Server) WaitSent(ctx context.Context, n int) ([]SentMessage, error) {
	err := s.wait(ctx, fmt.Sprintf("%d sent messages", n), func() bool { return len(s.sent) >= n })
	return s.Sent(), err
}

// Identifies returns the IDENTIFYs received, in order.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Identify(nil), s.identifies...)
}

// Resumes returns the RESUMEs received, in order.
func (s *Server) Resumes() []Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Resume(nil), s.resumes...)
}

// Heartbeats is how many heartbeats were received and acked.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeats
}

// SessionID is the current session's id ("" before the first READY).
func (s *Server) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// Seq is the last sequence number dispatched in the current session.
func (s *Server) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// Sent returns the messages created, in order.
func (s *Server) Sent() []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentMessage(nil), s.sent...)
}

// Edits returns the edits made, in order.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.edits...)
}

// Typing returns the channels a typing indicator was triggered in, in
// order.
func (s *Server) Typing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.typing...)
}

// Requests returns every REST request seen, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RateLimitNext answers the next n REST requests (other than gateway
// discovery) with 429 Too Many Requests and retry_after, as Discord does.
func (s *Server) RateLimitNext(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.rateLimits = append(s.rateLimits, retryAfter)
	}
}

// FailNext answers the next n REST requests (other than gateway discovery)
// with status and a Discord error body.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, status)
	}
}

// AddAttachment puts a file on the fake's CDN and returns the attachment
// object a message would carry for it; its URL is served (without the bot
// token, as Discord's CDN does) until the fake closes.
func (s *Server) AddAttachment(channelID, filename, contentType string, data []byte) Attachment {
	id := s.NewID()
	path := "/attachments/" + channelID + "/" + id + "/" + filename
	s.mu.Lock()
	s.files[path] = file{contentType: contentType, data: data}
	s.mu.Unlock()
	return Attachment{
		ID: id, Filename: filename, ContentType: contentType, Size: len(data),
		URL: s.http.URL + path + "?ex=0&is=0&hm=fake", ProxyURL: s.http.URL + path,
	}
}

func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.URL.Path]
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Authorized: r.Header.Get("Authorization") != ""})
	s.notifyLocked()
	s.mu.Unlock()
	if !ok {
		http.Error(w, "This content is no longer available.", http.StatusNotFound)
		return
	}
	if f.contentType != "" {
		w.Header().Set("Content-Type", f.contentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}

// ---- REST ----

// rest records a request, checks the bot token when auth is set, and
// serves injected rate limits and failures before h.
func (s *Server) rest(auth bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		authorized := r.Header.Get("Authorization") == "Bot "+s.opts.Token
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Authorized: authorized})
		s.notifyLocked()
		var retry time.Duration
		limited, status := false, 0
		if auth {
			switch {
			case len(s.rateLimits) > 0:
				retry, s.rateLimits = s.rateLimits[0], s.rateLimits[1:]
				limited = true
			case len(s.failures) > 0:
				status, s.failures = s.failures[0], s.failures[1:]
			}
		}
		s.mu.Unlock()
		switch {
		case auth && !authorized:
			writeError(w, http.StatusUnauthorized, 0, "401: Unauthorized")
		case limited:
			secs := retry.Seconds()
			h := w.Header()
			h.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
			h.Set("X-RateLimit-Limit", "5")
			h.Set("X-RateLimit-Remaining", "0")
			h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
			h.Set("X-RateLimit-Bucket", "fake-bucket")
			h.Set("X-RateLimit-Scope", "user")
			writeJSON(w, http.StatusTooManyRequests, map[string]any{
				"message": "You are being rate limited.", "retry_after": secs, "global": false,
			})
		case status != 0:
			code, msg := 0, http.StatusText(status)
			if status == http.StatusForbidden {
				code, msg = 50013, "Missing Permissions"
			}
			writeError(w, status, code, msg)
		default:
			h(w, r)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, map[string]any{"message": message, "code": code})
}

func (s *Server) getGateway(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"url": s.GatewayURL()})
}

func (s *Server) getGatewayBot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"url": s.GatewayURL(), "shards": 1,
		"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
	})
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.opts.Bot)
}

func isSnowflake(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request) {
	channel := r.PathValue("channel")
	if !isSnowflake(channel) {
		writeError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	var body struct {
		Content          string            `json:"content"`
		Nonce            json.RawMessage   `json:"nonce"`
		EnforceNonce     bool              `json:"enforce_nonce"`
		MessageReference *MessageReference `json:"message_reference"`
		AllowedMentions  *AllowedMentions  `json:"allowed_mentions"`
		Components       []Component       `json:"components"`
	}
	// A message with attachments comes as multipart/form-data: the JSON
	// in payload_json, each file in files[n].
	var uploads []SentFile
	raw := io.Reader(r.Body)
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
			return
		}
		raw = strings.NewReader(r.FormValue("payload_json"))
		for i := 0; ; i++ {
			fhs := r.MultipartForm.File[fmt.Sprintf("files[%d]", i)]
			if len(fhs) == 0 {
				break
			}
			f, err := fhs[0].Open()
			if err != nil {
				writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body")
				return
			}
			data, _ := io.ReadAll(f)
			f.Close()
			uploads = append(uploads, SentFile{Name: fhs[0].Filename, ContentType: fhs[0].Header.Get("Content-Type"), Data: data})
		}
	}
	if err := json.NewDecoder(raw).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	switch n := utf8.RuneCountInString(body.Content); {
	case strings.TrimSpace(body.Content) == "" && len(uploads) == 0:
		writeError(w, http.StatusBadRequest, 50006, "Cannot send an empty message")
		return
	case n > MaxContent:
		writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body: content must be 2000 or fewer in length.")
		return
	}
	if msg := checkComponents(body.Components); msg != "" {
		writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body: components: "+msg)
		return
	}
	nonce := string(body.Nonce)
	if u, err := strconv.Unquote(nonce); err == nil {
		nonce = u
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if body.EnforceNonce && nonce != "" {
		if m, ok := s.nonces[channel+"/"+nonce]; ok {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	m := &Message{
		ID: s.newIDLocked(), ChannelID: channel, Author: s.opts.Bot, Content: body.Content,
		Timestamp: time.Now().UTC().Truncate(time.Millisecond), Type: TypeDefault, Nonce: nonce,
		Mentions: []User{}, MentionRoles: []string{}, Attachments: []Attachment{}, Embeds: []any{},
		Components: body.Components,
	}
	for _, u := range uploads {
		id := s.newIDLocked()
		m.Attachments = append(m.Attachments, Attachment{ID: id, Filename: u.Name, ContentType: u.ContentType, Size: len(u.Data),
			URL: s.http.URL + "/attachments/" + channel + "/" + id + "/" + u.Name, ProxyURL: s.http.URL + "/attachments/" + channel + "/" + id + "/" + u.Name})
	}
	if ref := body.MessageReference; ref != nil && ref.MessageID != "" {
		m.Type = TypeReply
		m.MessageReference = &MessageReference{MessageID: ref.MessageID, ChannelID: channel, GuildID: ref.GuildID}
	}
	s.messages[m.ID] = m
	if body.EnforceNonce && nonce != "" {
		s.nonces[channel+"/"+nonce] = m
	}
	s.sent = append(s.sent, SentMessage{
		ID: m.ID, ChannelID: channel, Content: body.Content, Nonce: nonce, EnforceNonce: body.EnforceNonce,
		MessageReference: body.MessageReference, AllowedMentions: body.AllowedMentions, Files: uploads,
	})
	s.notifyLocked()
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request) {
	channel, id := r.PathValue("channel"), r.PathValue("message")
	var body struct {
		Content    *string      `json:"content"`
		Components *[]Component `json:"components"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, 50109, "The request body contains invalid JSON.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok || m.ChannelID != channel {
		writeError(w, http.StatusNotFound, 10008, "Unknown Message")
		return
	}
	if body.Components != nil {
		if msg := checkComponents(*body.Components); msg != "" {
			writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body: components: "+msg)
			return
		}
	}
	if body.Content != nil {
		if n := utf8.RuneCountInString(*body.Content); n > MaxContent {
			writeError(w, http.StatusBadRequest, 50035, "Invalid Form Body: content must be 2000 or fewer in length.")
			return
		}
		m.Content = *body.Content
		now := time.Now().UTC().Truncate(time.Millisecond)
		m.EditedTimestamp = &now
	}
	if body.Components != nil {
		m.Components = *body.Components
	}
	s.edits = append(s.edits, Edit{ChannelID: channel, MessageID: id, Content: m.Content})
	s.notifyLocked()
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) triggerTyping(w http.ResponseWriter, r *http.Request) {
	channel := r.PathValue("channel")
	if !isSnowflake(channel) {
		writeError(w, http.StatusNotFound, 10003, "Unknown Channel")
		return
	}
	s.mu.Lock()
	s.typing = append(s.typing, channel)
	s.notifyLocked()
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
