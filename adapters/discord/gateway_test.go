package discord

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/discord/discordtest"
)

const (
	userID   = "2000000000000000001"
	otherID  = "2000000000000000002"
	dmChan   = "3000000000000000001"
	guildID  = "4000000000000000001"
	chanID   = "4000000000000000002"
	threadID = "4000000000000000003"
)

var (
	alice = discordtest.User{ID: userID, Username: "alice", GlobalName: "Alice A."}
	sam   = discordtest.User{ID: otherID, Username: "sam"}
	when  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func TestHandshake(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ids := srv.Identifies()
	if len(ids) != 1 {
		t.Fatalf("identifies = %d, want 1", len(ids))
	}
	id := ids[0]
	if id.Token != "Bot "+srv.Token() {
		t.Errorf("identify token is not the bot token")
	}
	if want := 1<<0 | 1<<9 | 1<<12 | 1<<15; id.Intents != want {
		t.Errorf("intents = %d, want %d (guilds, guild messages, direct messages, message content)", id.Intents, want)
	}
	if id.Shard != nil {
		t.Errorf("shard = %v with one shard, want none", *id.Shard)
	}
	if err := srv.WaitHeartbeats(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The gateway was found through GET /api/v9/gateway on api_url.
	found := false
	for _, r := range srv.Requests() {
		found = found || r.Method == "GET" && r.Path == "/api/v9/gateway"
	}
	if !found {
		t.Errorf("no GET /api/v9/gateway on the fake: %+v", srv.Requests())
	}
	m := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "hi"})
	if in := s.next(t); in.MessageID != m.ID || in.Text != "hi" {
		t.Errorf("delivered %+v, want message %s", in, m.ID)
	}
}

func TestGatewayURLAndShards(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "gateway_url: "+srv.GatewayURL()+"\nshard_id: 1\nshard_count: 2\n", nil)
	start(t, a, newSink())
	ctx := waitCtx(t)
	ids, err := srv.WaitIdentifies(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0].Shard == nil || *ids[0].Shard != [2]int{1, 2} {
		t.Errorf("shard = %v, want [1 2]", ids[0].Shard)
	}
	for _, r := range srv.Requests() {
		if strings.Contains(r.Path, "/gateway") {
			t.Errorf("gateway_url is set, but the API was asked: %s %s", r.Method, r.Path)
		}
	}
}

func TestInbound(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	bot := srv.Bot()
	otherBot := discordtest.User{ID: "2000000000000000009", Username: "otherbot", Bot: true}
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}

	base := adapters.Inbound{Adapter: "dc-test", Surface: "discord", UserID: userID, DisplayName: "Alice A.", Time: when}
	with := func(f func(*adapters.Inbound)) *adapters.Inbound {
		in := base
		f(&in)
		return &in
	}
	tests := []struct {
		name string
		msg  discordtest.Message
		want *adapters.Inbound // nil: ignored
	}{
		{
			name: "direct message",
			msg:  discordtest.Message{ID: "5001", ChannelID: dmChan, Author: alice, Content: "hello"},
			want: with(func(in *adapters.Inbound) { in.ChatID, in.MessageID, in.Text = dmChan, "5001", "hello" }),
		},
		{
			name: "guild channel, not addressed, nickname",
			msg: discordtest.Message{ID: "5002", ChannelID: chanID, GuildID: guildID, Author: alice,
				Member: &discordtest.Member{Nick: "Ally"}, Content: "chatting"},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group, in.DisplayName = chanID, "5002", "chatting", true, "Ally"
			}),
		},
		{
			name: "thread is its own chat",
			msg:  discordtest.Message{ID: "5003", ChannelID: threadID, GuildID: guildID, Author: alice, Content: "in a thread"},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group = threadID, "5003", "in a thread", true
			}),
		},
		{
			name: "mention at the start is stripped",
			msg: discordtest.Message{ID: "5004", ChannelID: chanID, GuildID: guildID, Author: alice,
				Content: "<@" + bot.ID + ">, /reset", Mentions: []discordtest.User{bot}},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group, in.Mentioned = chanID, "5004", "/reset", true, true
			}),
		},
		{
			name: "nickname mention mid-text, other user named",
			msg: discordtest.Message{ID: "5005", ChannelID: chanID, GuildID: guildID, Author: alice,
				Content: "hey <@!" + bot.ID + "> ask <@" + otherID + "> too", Mentions: []discordtest.User{bot, sam}},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group, in.Mentioned = chanID, "5005", "hey ask @sam too", true, true
			}),
		},
		{
			name: "reply to the bot counts as a mention",
			msg: discordtest.Message{ID: "5006", ChannelID: chanID, GuildID: guildID, Author: alice, Content: "and then?",
				MessageReference:  &discordtest.MessageReference{MessageID: "5900", ChannelID: chanID, GuildID: guildID},
				ReferencedMessage: &discordtest.Message{ID: "5900", ChannelID: chanID, Author: bot, Content: "once upon a time", Timestamp: when}},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group, in.Mentioned, in.ReplyTo = chanID, "5006", "and then?", true, true, "5900"
			}),
		},
		{
			name: "reply to someone else is not",
			msg: discordtest.Message{ID: "5007", ChannelID: chanID, GuildID: guildID, Author: alice, Content: "agreed",
				MessageReference:  &discordtest.MessageReference{MessageID: "5901", ChannelID: chanID, GuildID: guildID},
				ReferencedMessage: &discordtest.Message{ID: "5901", ChannelID: chanID, Author: sam, Content: "pizza?", Timestamp: when}},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID, in.Text, in.Group, in.ReplyTo = chanID, "5007", "agreed", true, "5901"
			}),
		},
		{
			name: "attachment becomes a file ref",
			msg: discordtest.Message{ID: "5008", ChannelID: dmChan, Author: alice, Attachments: []discordtest.Attachment{{
				ID: "6001", Filename: "cat.png", ContentType: "image/png", Size: 12345,
				URL: "https://cdn.discordapp.com/attachments/1/6001/cat.png", ProxyURL: "https://media.discordapp.net/attachments/1/6001/cat.png",
			}}},
			want: with(func(in *adapters.Inbound) {
				in.ChatID, in.MessageID = dmChan, "5008"
				in.Files = []adapters.FileRef{{ID: "6001", Name: "cat.png", MediaType: "image/png", Size: 12345,
					URL: "https://cdn.discordapp.com/attachments/1/6001/cat.png"}}
			}),
		},
		{
			name: "the bot's own message is ignored",
			msg:  discordtest.Message{ID: "5009", ChannelID: chanID, GuildID: guildID, Author: bot, Content: "my reply"},
		},
		{
			name: "another bot is ignored",
			msg: discordtest.Message{ID: "5010", ChannelID: chanID, GuildID: guildID, Author: otherBot,
				Content: "<@" + bot.ID + "> ping", Mentions: []discordtest.User{bot}},
		},
		{
			name: "a system message is ignored",
			msg:  discordtest.Message{ID: "5011", ChannelID: chanID, GuildID: guildID, Author: alice, Type: 7},
		},
		{
			name: "only a mention, nothing said, is ignored",
			msg: discordtest.Message{ID: "5012", ChannelID: chanID, GuildID: guildID, Author: alice,
				Content: "<@" + bot.ID + ">", Mentions: []discordtest.User{bot}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.msg.Timestamp = when
			srv.DispatchMessage(tc.msg)
			// A plain message after it, in the same chat: chats deliver in
			// order, so whatever tc.msg became arrives first.
			sentinel := srv.DispatchMessage(discordtest.Message{ChannelID: tc.msg.ChannelID, GuildID: tc.msg.GuildID,
				Author: alice, Content: "sentinel", Timestamp: when})
			got := s.next(t)
			if tc.want == nil {
				if got.MessageID != sentinel.ID {
					t.Fatalf("delivered %+v, want it ignored", got)
				}
				return
			}
			if !got.Time.Equal(tc.want.Time) {
				t.Errorf("time = %v, want %v", got.Time, tc.want.Time)
			}
			got.Time = tc.want.Time
			if !reflect.DeepEqual(got, *tc.want) {
				t.Errorf("delivered\n%+v\nwant\n%+v", got, *tc.want)
			}
			if next := s.next(t); next.MessageID != sentinel.ID {
				t.Errorf("then delivered %+v, want the sentinel", next)
			}
		})
	}
}

// The role Discord made for the bot in a guild addresses the bot like a
// mention of it; other roles don't.
func TestBotRoleMention(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	bot := srv.Bot()
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	const botRole, staffRole, laterRole = "3000000000000000001", "3000000000000000002", "3000000000000000003"
	srv.Dispatch("GUILD_CREATE", map[string]any{"id": guildID, "name": "test guild", "roles": []any{
		map[string]any{"id": guildID, "name": "@everyone"},
		map[string]any{"id": staffRole, "name": "staff", "managed": false},
		map[string]any{"id": botRole, "name": bot.Username, "managed": true, "tags": map[string]any{"bot_id": bot.ID}},
	}})
	for _, tc := range []struct {
		msg       discordtest.Message
		text      string
		mentioned bool
	}{
		{discordtest.Message{ID: "5101", Content: "<@&" + botRole + "> what's the plan?", MentionRoles: []string{botRole}}, "what's the plan?", true},
		{discordtest.Message{ID: "5102", Content: "<@&" + staffRole + "> meeting at 3", MentionRoles: []string{staffRole}}, "<@&" + staffRole + "> meeting at 3", false},
	} {
		tc.msg.ChannelID, tc.msg.GuildID, tc.msg.Author, tc.msg.Timestamp = chanID, guildID, alice, when
		srv.DispatchMessage(tc.msg)
		got := s.next(t)
		if got.MessageID != tc.msg.ID || got.Text != tc.text || got.Mentioned != tc.mentioned {
			t.Errorf("delivered %s %q mentioned %v; want %s %q mentioned %v", got.MessageID, got.Text, got.Mentioned,
				tc.msg.ID, tc.text, tc.mentioned)
		}
	}
	// A role given to the bot later (its role recreated) is seen too.
	srv.Dispatch("GUILD_ROLE_CREATE", map[string]any{"guild_id": guildID, "role": map[string]any{
		"id": laterRole, "name": bot.Username, "managed": true, "tags": map[string]any{"bot_id": bot.ID}}})
	srv.DispatchMessage(discordtest.Message{ID: "5103", ChannelID: chanID, GuildID: guildID, Author: alice, Timestamp: when,
		Content: "<@&" + laterRole + "> again", MentionRoles: []string{laterRole}})
	if got := s.next(t); got.MessageID != "5103" || !got.Mentioned || got.Text != "again" {
		t.Errorf("after the role changed: %+v", got)
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		drop func(*discordtest.Server) bool
	}{
		{"socket dropped", (*discordtest.Server).Drop},
		{"closed with 4000", func(s *discordtest.Server) bool { return s.CloseGateway(4000, "Unknown error") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := discordtest.NewServer(t, discordtest.Options{})
			a := newAdapter(t, srv, "", nil)
			s := newSink()
			start(t, a, s)
			ctx := waitCtx(t)
			if err := srv.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			first := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "one"})
			if in := s.next(t); in.MessageID != first.ID {
				t.Fatalf("delivered %s, want %s", in.MessageID, first.ID)
			}
			session, seq := srv.SessionID(), srv.Seq()
			if !tc.drop(srv) {
				t.Fatal("no connection to drop")
			}
			// Sent while the bot is away: replayed on the resume.
			missed := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "two"})

			resumes, err := srv.WaitResumes(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			r := resumes[0]
			if r.SessionID != session || r.Seq != seq || r.Token != "Bot "+srv.Token() {
				t.Errorf("resume = session %q seq %d (token ok %v), want session %q seq %d",
					r.SessionID, r.Seq, r.Token == "Bot "+srv.Token(), session, seq)
			}
			if in := s.next(t); in.MessageID != missed.ID {
				t.Errorf("after the resume delivered %s, want the missed %s", in.MessageID, missed.ID)
			}
			if err := srv.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			after := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "three"})
			if in := s.next(t); in.MessageID != after.ID {
				t.Errorf("delivered %s, want %s", in.MessageID, after.ID)
			}
			if n := len(srv.Identifies()); n != 1 {
				t.Errorf("identified %d times, want once (the session resumed)", n)
			}
		})
	}
}

func TestResumeRefusedIdentifiesAgain(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	srv.InvalidateSession()
	srv.Drop()
	if _, err := srv.WaitResumes(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.WaitIdentifies(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	m := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "new session"})
	if in := s.next(t); in.MessageID != m.ID {
		t.Errorf("delivered %s, want %s", in.MessageID, m.ID)
	}
	// The new connection stays up: the lost one's goroutines once closed
	// each new connection a second after it opened, for good.
	time.Sleep(2500 * time.Millisecond)
	if ids, res := len(srv.Identifies()), len(srv.Resumes()); ids != 2 || res != 1 {
		t.Errorf("after the new session: %d identifies and %d resumes, want 2 and 1", ids, res)
	}
}

// TestExpiredSessionIdentifiesAgain: a session Discord closes resumes of
// (4009) is given up for a new one, not resumed forever.
func TestExpiredSessionIdentifiesAgain(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	s := newSink()
	start(t, a, s)
	ctx := waitCtx(t)
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	srv.ExpireSession(4009)
	srv.Drop()
	if _, err := srv.WaitIdentifies(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Resumes()); n != 1 {
		t.Errorf("%d resumes, want 1 before identifying anew", n)
	}
	m := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "new session"})
	if in := s.next(t); in.MessageID != m.ID {
		t.Errorf("delivered %s, want %s", in.MessageID, m.ID)
	}
	// The new connection stays up: the lost one's goroutines once closed
	// each new connection a second after it opened, for good.
	time.Sleep(2500 * time.Millisecond)
	if ids, res := len(srv.Identifies()), len(srv.Resumes()); ids != 2 || res != 1 {
		t.Errorf("after the new session: %d identifies and %d resumes, want 2 and 1", ids, res)
	}
}

func TestDeliveryRetried(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	log, logs := newLog()
	a := newAdapter(t, srv, "", log)
	s := newSink()
	s.failN = 1
	start(t, a, s)
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	m1 := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "first"})
	m2 := srv.DispatchMessage(discordtest.Message{ChannelID: dmChan, Author: alice, Content: "second"})
	if in := s.next(t); in.MessageID != m1.ID {
		t.Fatalf("delivered %s first, want %s (held and retried)", in.MessageID, m1.ID)
	}
	if in := s.next(t); in.MessageID != m2.ID {
		t.Fatalf("delivered %s second, want %s", in.MessageID, m2.ID)
	}
	var ids []string
	for _, in := range s.Tries() {
		ids = append(ids, in.MessageID)
	}
	if want := []string{m1.ID, m1.ID, m2.ID}; !reflect.DeepEqual(ids, want) {
		t.Errorf("delivery attempts = %v, want %v", ids, want)
	}
	if !strings.Contains(logs.String(), "delivery failed; will retry") {
		t.Errorf("the failure was not logged:\n%s", logs)
	}
}

func TestBadTokenStops(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	const wrong = "wrong.token-value.xyz"
	log, logs := newLog()
	ad, err := New("dc-bad", yamlDecoder("token: "+wrong+"\napi_url: "+srv.URL()+"\n"), adapters.Deps{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ad.Start(context.Background(), newSink()) }()
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Start kept going with a refused token")
	}
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Start = %v, want ErrUnauthorized", err)
	}
	for _, s := range []string{err.Error(), logs.String()} {
		if strings.Contains(s, wrong) || strings.Contains(s, srv.Token()) {
			t.Errorf("a token leaked: %s", s)
		}
	}
}

// TestShutdownWhileConnecting: a gateway that accepts but never answers
// must not keep Start from returning.
func TestShutdownWhileConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "gateway_url: ws://"+ln.Addr().String()+"/gateway\n", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx, newSink()) }()
	var c net.Conn
	select {
	case c = <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the adapter never dialled the gateway")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start = %v, want nil at shutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Start still blocked in the handshake 5s after shutdown")
	}
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	start(t, a, newSink())
	if err := srv.WaitReady(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // should it run after all, it stops at once
	if err := a.Start(ctx, newSink()); err == nil {
		t.Error("a second Start succeeded")
	}
}
