package whatsapp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/gateway"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/speech"
	"github.com/parleyd/parley/speech/speechtest"
)

// waChannels is the gateway's one channel: the adapter under test.
type waChannels struct{ a *Adapter }

func (c waChannels) Adapter(id adapters.ID) (adapters.Adapter, bool) { return c.a, id == "wa" }
func (waChannels) Streams(adapters.ID) bool                          { return false }

// A WhatsApp voice note (PTT) through the adapter's client seam reaches a
// real gateway, which downloads it through the seam and has the fake
// transcription server transcribe it; the turn answers the transcript,
// the reply goes back through the seam, and the message is stored as its
// transcript with the audio file.
func TestVoiceNoteIsTranscribed(t *testing.T) {
	sp := speechtest.New(t)
	sp.Transcripts["wa-voice"] = "book a table for two at eight"
	sp.Transcripts["wa-ptv"] = "and a taxi at half past seven"
	fc := newFakeClient()
	fc.downloads["/v/t62/voice-1"] = []byte("wa-voice")
	fc.downloads["/v/t62/ptv-1"] = []byte("wa-ptv")
	a, _ := testAdapter(t, "", fc, newFakeClock(true), adapters.Deps{})
	db := dbtest.SQLite(t)
	store := gateway.NewStore(db, nil)
	sender := gateway.NewSender(store, gateway.SenderOptions{Adapter: func(id adapters.ID) (adapters.Adapter, bool) { return a, id == "wa" },
		Poll: 10 * time.Millisecond})
	ss := sessions.NewStore(db)
	gw, err := gateway.New(gateway.Options{Store: store, Sessions: ss, Sender: sender, Channels: waChannels{a},
		Agents:      []gateway.Agent{{ID: "default", Mode: gateway.ModeFollowup}},
		Transcriber: speech.New(speech.Options{BaseURL: sp.BaseURL(), APIKey: "sk-test"}),
		Runner: gateway.RunFunc(func(_ context.Context, in gateway.TurnInput) (string, error) {
			return "heard: " + in.Messages[0].Text, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sender.Run(ctx); close(done) }()
	defer func() {
		cctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = gw.Close(cctx)
		cancel()
		<-done
	}()
	runSession(t, a, fc, gw)
	fc.emit(&events.Connected{})
	waitHealth(t, a, "connected", func(ok bool, _ string) bool { return ok })
	fc.emit(dm("V1", &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
		Mimetype: proto.String("audio/ogg; codecs=opus"), PTT: proto.Bool(true), FileLength: proto.Uint64(8),
		DirectPath: proto.String("/v/t62/voice-1"), MediaKey: []byte("k"), FileEncSHA256: []byte("e"), FileSHA256: []byte("s"),
	}}))
	want := sp.Transcripts["wa-voice"]
	fc.waitFor(t, "the reply", func(f *fakeClient) bool {
		for _, m := range f.sent {
			if strings.Contains(m.msg.GetConversation()+m.msg.GetExtendedTextMessage().GetText(), "heard: "+want) {
				return true
			}
		}
		return false
	})
	// Stored, before it ran, as its transcript with the audio: the
	// inbound record a replay after a crash reads (the agent, which this
	// rig has not, stores the session's message from it).
	var payload string
	if err := db.Read().QueryRowContext(context.Background(), `SELECT payload FROM inbound WHERE platform_message_id = 'V1'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var in adapters.Inbound
	if err := json.Unmarshal([]byte(payload), &in); err != nil {
		t.Fatal(err)
	}
	if !in.Transcribed || !strings.Contains(in.Text, want) || len(in.Files) != 1 || in.Files[0].MediaType != "audio/ogg" {
		t.Fatalf("stored %+v, want the transcript with the audio", in)
	}
	if heard := sp.Heard(); len(heard) != 1 {
		t.Fatalf("the transcription server heard %d notes, want 1", len(heard))
	}

	// A video note (PTV) is heard as a voice note is.
	fc.emit(dm("V2", &waE2E.Message{PtvMessage: &waE2E.VideoMessage{
		Mimetype: proto.String("video/mp4"), Seconds: proto.Uint32(5), FileLength: proto.Uint64(6),
		DirectPath: proto.String("/v/t62/ptv-1"), MediaKey: []byte("k"), FileEncSHA256: []byte("e"), FileSHA256: []byte("s"),
	}}))
	want = sp.Transcripts["wa-ptv"]
	fc.waitFor(t, "the video note's reply", func(f *fakeClient) bool {
		for _, m := range f.sent {
			if strings.Contains(m.msg.GetConversation()+m.msg.GetExtendedTextMessage().GetText(), "heard: "+want) {
				return true
			}
		}
		return false
	})
	if files := sp.Files(); len(files) != 2 || files[1] != "video_note.mp4 video/mp4" {
		t.Fatalf("the transcription server was sent %q; want the video note as video_note.mp4, video/mp4", files)
	}
}
