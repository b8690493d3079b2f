package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/discord/discordtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech/speechtest"
)

// A Discord voice message over the fake gateway (an audio attachment on
// the fake CDN) is transcribed by the fake transcription server,
// answered, and stored as its transcript with the audio as a file part.
func TestDiscordVoiceMessageIsTranscribed(t *testing.T) {
	sp := speechtest.New(t)
	sp.Transcripts["discord-voice"] = "what is on my calendar today"
	dc := discordtest.NewServer(t, discordtest.Options{})
	d, _, stop := testDaemon(t, "gateway:\n  debounce: 0s\nadapters:\n  - id: dc\n    type: discord\n    dm_policy: open\n"+
		"    token: \""+dc.Token()+"\"\n    api_url: "+dc.URL()+"\n"+
		"speech:\n  base_url: "+sp.BaseURL()+"\n  api_key: sk-test\n", configuredChannels(t))
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const dm = "3000000000000000001"
	user := discordtest.User{ID: "2000000000000000001", Username: "alice", GlobalName: "Alice"}
	att := dc.AddAttachment(dm, "voice-message.ogg", "audio/ogg", []byte("discord-voice"))
	waitUntil(t, 20*time.Second, "the Discord channel connected", func() bool {
		ok, _ := d.adapters["dc"].(interface{ Health() (bool, string) }).Health()
		return ok
	})
	dc.DispatchMessage(discordtest.Message{ChannelID: dm, Author: user, Attachments: []discordtest.Attachment{att}})
	want := sp.Transcripts["discord-voice"]
	waitUntil(t, 20*time.Second, "a reply echoing the transcript", func() bool {
		for _, m := range dc.Sent() {
			if m.ChannelID == dm && strings.Contains(m.Content, want) {
				return true
			}
		}
		return false
	})
	ss, err := d.sessions.ActiveInChat(ctx, "discord", dm)
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %v %v", ss, err)
	}
	msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
	if err != nil || len(msgs) == 0 {
		t.Fatalf("messages %v %v", msgs, err)
	}
	m := msgs[0]
	if m.Role != sessions.RoleUser || !strings.Contains(m.Content, want) || len(m.Parts) == 0 {
		t.Fatalf("stored %+v, want the transcript", m)
	}
	fd, ok := m.Parts[0].File()
	if !ok || m.Parts[0].MediaType != "audio/ogg" || fd.Note != gateway.TranscribedNote {
		t.Fatalf("stored part %+v (%+v), want the audio marked as transcribed", m.Parts[0], fd)
	}
	if heard := sp.Heard(); len(heard) != 1 {
		t.Fatalf("the transcription server heard %d notes, want 1", len(heard))
	}
}
