package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech/speechtest"
)

// Voice notes on Telegram are transcribed before they are gated and run:
// in a private chat, in a group where the note says the bot's name, and
// in a forum topic. Each is answered, and stored as its transcript with
// the audio as a file part the model is told was transcribed.
func TestTelegramVoiceNotesAreTranscribed(t *testing.T) {
	sp := speechtest.New(t)
	sp.Transcripts["audio-private"] = "remind me to buy milk"
	sp.Transcripts["audio-group"] = "Parley test bot, what time is it in Tokyo"
	sp.Transcripts["audio-unaddressed"] = "we should meet on friday"
	sp.Transcripts["audio-topic"] = "@parley_test_bot summarize the thread"
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "    groups:\n      policy: open\nspeech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-test\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cases := []struct {
		name       string
		chat, user int64
		thread     int
		audio      string
		chatKey    string
		answered   bool
	}{
		{"private chat", 501, 501, 0, "audio-private", "501", true},
		{"group, not addressed", -1002, 7, 0, "audio-unaddressed", "-1002", false},
		{"group, a spoken mention", -1002, 7, 0, "audio-group", "-1002", true},
		{"forum topic", -1003, 7, 42, "audio-topic", "-1003:topic:42", true},
	}
	replies := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			heard, fetched := len(sp.Heard()), tg.Calls("getFile")
			tg.InjectVoice(tc.chat, tc.user, tc.thread, []byte(tc.audio))
			want := sp.Transcripts[tc.audio]
			if tc.answered {
				replies++
				sent, err := tg.WaitSent(ctx, replies)
				if err != nil {
					t.Fatal(err)
				}
				reply := sent[replies-1]
				if reply.ChatID != fmt.Sprint(tc.chat) || !strings.Contains(reply.Text, want) || reply.ThreadID != tc.thread {
					t.Fatalf("reply %+v, want one in chat %d (topic %d) echoing %q", reply, tc.chat, tc.thread, want)
				}
			} else if err := tg.WaitFor(ctx, func() bool { return len(sp.Heard()) > heard }); err != nil {
				t.Fatal(err)
			}
			var msgs []sessions.Message
			waitUntil(t, 20*time.Second, fmt.Sprintf("a stored user message holding %q", want), func() bool {
				ss, err := d.sessions.ActiveInChat(ctx, "telegram", tc.chatKey)
				if err != nil || len(ss) != 1 {
					return false
				}
				all, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
				msgs = nil
				for _, m := range all {
					if m.Role == sessions.RoleUser && strings.Contains(m.Content, want) {
						msgs = append(msgs, m)
					}
				}
				return err == nil && len(msgs) == 1
			})
			m := msgs[0]
			// The voice note's part, then, when a turn answered it, the
			// record of what the turn ran with.
			if !(len(m.Parts) == 1 || len(m.Parts) == 2 && m.Parts[1].Type == "turn") {
				t.Fatalf("stored parts %+v, want the voice note's (and the turn's)", m.Parts)
			}
			fd, ok := m.Parts[0].File()
			if !ok || m.Parts[0].MediaType != "audio/ogg" || fd.Note != gateway.TranscribedNote {
				t.Fatalf("stored part %+v (%+v), want the audio marked as transcribed", m.Parts[0], fd)
			}
			// Fetched once: to transcribe it, and kept with its message
			// from those bytes.
			if n := tg.Calls("getFile") - fetched; n != 1 {
				t.Fatalf("the voice note was fetched from Telegram %d times; want once", n)
			}
		})
	}
	if got := tg.SentCount(); got != replies {
		t.Fatalf("%d replies sent, want %d: the group's unaddressed note was answered", got, replies)
	}
	// The model reads the transcript and is told it is one.
	var seen bool
	for _, r := range d.offline.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "remind me to buy milk") && strings.Contains(m.Content, gateway.TranscribedNote) {
				seen = true
			}
		}
	}
	if !seen {
		t.Fatal("the model never read the private chat's transcript marked as a machine transcript")
	}
}

// A transcription that fails is said plainly in the chat with a
// reference, and the message is kept, with its audio.
func TestTelegramVoiceNoteTranscriptionFails(t *testing.T) {
	sp := speechtest.New(t)
	sp.Fail = http.StatusInternalServerError
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "speech:\n  base_url: "+sp.BaseURL()+"\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg.InjectVoice(77, 77, 0, []byte("mumble"))
	sent, err := tg.WaitSent(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sent[0].Text, "I couldn't understand that voice note (reference ") || strings.Contains(sent[0].Text, "500") {
		t.Fatalf("reply %q, want the plain sentence with a reference", sent[0].Text)
	}
	ss, err := d.sessions.ActiveInChat(ctx, "telegram", "77")
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions: %v %v", ss, err)
	}
	msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) == 0 {
		t.Fatalf("stored %v, %v; want the voice note kept", msgs, err)
	}
	fd, ok := msgs[0].Parts[0].File()
	if !ok || fd.Note != gateway.VoiceFailedNote {
		t.Fatalf("stored %+v, want the audio part marked untranscribed", msgs[0])
	}
	if n := len(d.offline.Requests()); n != 0 {
		t.Fatalf("the model was called %d times for a voice note nobody heard", n)
	}
}

// What a person shares on Telegram besides text, voice and files reaches
// the model: a video note is transcribed as a voice note is (its video
// kept as the message's file part), and a place, a contact and a sticker
// come as a line each, all answered.
func TestTelegramVideoNotesAndSharedThings(t *testing.T) {
	sp := speechtest.New(t)
	sp.Transcripts["video-note"] = "show me the way to the station"
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "speech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-test\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const chat = 601
	from := &telegramtest.User{ID: chat, FirstName: "Ann"}
	inject := func(mod func(*telegramtest.Message)) {
		m := &telegramtest.Message{MessageID: tg.NextMessageID(fmt.Sprint(chat)), From: from,
			Chat: telegramtest.Chat{ID: chat, Type: "private", FirstName: "Ann"}, Date: time.Now().Unix()}
		mod(m)
		tg.Inject(telegramtest.Update{Message: m})
	}
	tg.AddFile("vn-1", []byte("video-note"))
	for i, c := range []struct {
		mod  func(*telegramtest.Message)
		want string
	}{
		{func(m *telegramtest.Message) {
			m.VideoNote = &telegramtest.VideoNote{FileID: "vn-1", FileUniqueID: "uvn-1", Length: 384, Duration: 4, FileSize: len("video-note")}
		}, "show me the way to the station"},
		{func(m *telegramtest.Message) {
			m.Venue = &telegramtest.Venue{Location: telegramtest.Location{Latitude: 52.525084, Longitude: 13.369402}, Title: "Berlin Hauptbahnhof", Address: "Europaplatz 1"}
			m.Location = &m.Venue.Location
		}, "[shared a place: Berlin Hauptbahnhof, Europaplatz 1 (52.525084, 13.369402)]"},
		{func(m *telegramtest.Message) {
			m.Contact = &telegramtest.Contact{PhoneNumber: "+4930123456", FirstName: "Bob"}
		}, "[shared a contact: Bob, +4930123456]"},
		{func(m *telegramtest.Message) {
			m.Sticker = &telegramtest.Sticker{FileID: "st-1", FileUniqueID: "ust-1", Type: "regular", Width: 512, Height: 512, Emoji: "🙏"}
		}, "[sent a sticker: 🙏]"},
	} {
		inject(c.mod)
		sent, err := tg.WaitSent(ctx, i+1)
		if err != nil {
			t.Fatal(err)
		}
		if got := sent[i].Text; !strings.Contains(got, c.want) {
			t.Fatalf("reply %d is %q; want one answering %q", i+1, got, c.want)
		}
	}
	if got := sp.Files(); len(got) != 1 || got[0] != "video_note.mp4 video/mp4" {
		t.Fatalf("the speech server was sent %q; want the video note as video_note.mp4, video/mp4", got)
	}
	ss, err := d.sessions.ActiveInChat(ctx, "telegram", fmt.Sprint(chat))
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %v, %v", ss, err)
	}
	msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var note *sessions.Message
	for i, m := range msgs {
		if m.Role == sessions.RoleUser && m.Content == "show me the way to the station" {
			note = &msgs[i]
		}
	}
	if note == nil {
		t.Fatalf("no stored message holds the video note's transcript: %+v", msgs)
	}
	if fd, ok := note.Parts[0].File(); !ok || note.Parts[0].MediaType != "video/mp4" || fd.Note != gateway.TranscribedNote {
		t.Fatalf("stored part %+v (%+v), want the video note marked as transcribed", note.Parts[0], fd)
	}
	// A live location moving on is no message: nothing more is answered.
	tg.Inject(telegramtest.Update{EditedMessage: &telegramtest.Message{MessageID: 1, From: from, EditDate: time.Now().Unix(),
		Chat: telegramtest.Chat{ID: chat, Type: "private", FirstName: "Ann"}, Date: time.Now().Unix(),
		Location: &telegramtest.Location{Latitude: 52.5, Longitude: 13.4, LivePeriod: 600}}})
	tg.InjectText(chat, chat, "done")
	sent, err := tg.WaitSent(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 5 || !strings.Contains(sent[4].Text, "done") {
		t.Fatalf("after a live location's move, replies %+v; want only the answer to \"done\"", sent)
	}
}
