package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/adapters"
)

var msgTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// dm is a message from alice to the bot.
func dm(id string, m *waE2E.Message) *events.Message {
	return &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: alicePN, Sender: alicePN.ToNonAD()},
			ID:            id, Timestamp: msgTime, PushName: "Alice", Type: "text",
		},
		Message: m,
	}
}

// inGroup is a message from sender in the test group.
func inGroup(id string, sender types.JID, m *waE2E.Message) *events.Message {
	return &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: groupJID, Sender: sender, IsGroup: true},
			ID:            id, Timestamp: msgTime, PushName: "Bob",
		},
		Message: m,
	}
}

func text(s string) *waE2E.Message { return &waE2E.Message{Conversation: proto.String(s)} }

func extended(s string, ci *waE2E.ContextInfo) *waE2E.Message {
	return &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String(s), ContextInfo: ci}}
}

var (
	imageMsg = &waE2E.ImageMessage{
		Caption: proto.String("look at this"), Mimetype: proto.String("image/jpeg"), FileLength: proto.Uint64(48213),
		DirectPath: proto.String("/v/t62.7118-24/123_456.enc?ccb=11-4"), MediaKey: bytes.Repeat([]byte{1}, 32),
		FileSHA256: bytes.Repeat([]byte{2}, 32), FileEncSHA256: bytes.Repeat([]byte{3}, 32),
	}
	documentMsg = &waE2E.DocumentMessage{
		FileName: proto.String("invoice.pdf"), Title: proto.String("Invoice"), Mimetype: proto.String("application/pdf"),
		FileLength: proto.Uint64(120034), DirectPath: proto.String("/v/t62.7119-24/789.enc"), MediaKey: bytes.Repeat([]byte{4}, 32),
	}
)

func TestConvert(t *testing.T) {
	type want struct {
		chat, user, name, text, replyTo string
		group, mentioned                bool
		files                           []adapters.FileRef // IDs not compared
	}
	withInfo := func(e *events.Message, f func(*types.MessageInfo)) *events.Message { f(&e.Info); return e }
	tests := []struct {
		name string
		evt  *events.Message
		skip string
		want want
	}{
		{name: "contact text", evt: dm("A1", text("hello")),
			want: want{chat: "4915100000002@s.whatsapp.net", user: "4915100000002@s.whatsapp.net", name: "Alice", text: "hello"}},
		{name: "contact from a device", evt: withInfo(dm("A2", text("hi")), func(i *types.MessageInfo) {
			i.Sender = types.JID{User: alicePN.User, Server: types.DefaultUserServer, Device: 3}
		}), want: want{chat: "4915100000002@s.whatsapp.net", user: "4915100000002@s.whatsapp.net", name: "Alice", text: "hi"}},
		{name: "extended text replying", evt: dm("A3", extended("yes, that one", &waE2E.ContextInfo{
			StanzaID: proto.String("3EB0BOTMSG"), Participant: proto.String(botPN.String()),
			QuotedMessage: text("which one?"),
		})), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "yes, that one", replyTo: "3EB0BOTMSG"}},
		{name: "contact by LID with the number alongside", evt: withInfo(dm("A4", text("lid")), func(i *types.MessageInfo) {
			i.Chat, i.Sender, i.SenderAlt, i.AddressingMode = aliceLID, aliceLID, alicePN, types.AddressingModeLID
		}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "lid"}},
		{name: "contact by LID, number from the LID map", evt: withInfo(dm("A5", text("mapped")), func(i *types.MessageInfo) {
			i.Chat, i.Sender = aliceLID, aliceLID
		}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "mapped"}},
		{name: "contact by LID only", evt: withInfo(dm("A6", text("who")), func(i *types.MessageInfo) {
			i.Chat, i.Sender = types.NewJID("999", types.HiddenUserServer), types.NewJID("999", types.HiddenUserServer)
		}), want: want{chat: "999@lid", user: "999@lid", name: "Alice", text: "who"}},
		{name: "incoming broadcast list", evt: withInfo(dm("A7", text("to all")), func(i *types.MessageInfo) {
			i.Chat, i.IsGroup = types.NewJID("1234567890", types.BroadcastServer), true
		}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "to all"}},

		{name: "group without mention", evt: inGroup("G1", bobPN, text("lunch?")),
			want: want{chat: "120363000000000001@g.us", user: "4915100000003@s.whatsapp.net", name: "Bob", text: "lunch?", group: true}},
		{name: "group mentioning the bot by number", evt: inGroup("G2", bobPN, extended("@4915100000001 what's up", &waE2E.ContextInfo{
			MentionedJID: []string{alicePN.String(), botPN.String()},
		})), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", text: "@4915100000001 what's up", group: true, mentioned: true}},
		{name: "group mentioning the bot by LID", evt: inGroup("G3", bobPN, extended("@100000000000001 hi", &waE2E.ContextInfo{
			MentionedJID: []string{botLID.String()},
		})), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", text: "@100000000000001 hi", group: true, mentioned: true}},
		{name: "group mentioning someone else", evt: inGroup("G4", bobPN, extended("@alice hi", &waE2E.ContextInfo{
			MentionedJID: []string{alicePN.String()},
		})), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", text: "@alice hi", group: true}},
		{name: "group reply to the bot", evt: inGroup("G5", bobPN, extended("thanks", &waE2E.ContextInfo{
			StanzaID: proto.String("3EB0BOT"), Participant: proto.String("100000000000001:4@lid"),
		})), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", text: "thanks", group: true, mentioned: true, replyTo: "3EB0BOT"}},
		{name: "group reply to someone else", evt: inGroup("G6", bobPN, extended("+1", &waE2E.ContextInfo{
			StanzaID: proto.String("3EB0ALICE"), Participant: proto.String(alicePN.String()),
		})), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", text: "+1", group: true, replyTo: "3EB0ALICE"}},
		{name: "group sender by LID", evt: withInfo(inGroup("G7", aliceLID, text("hey")), func(i *types.MessageInfo) {
			i.SenderAlt, i.AddressingMode = alicePN, types.AddressingModeLID
		}), want: want{chat: groupJID.String(), user: alicePN.String(), name: "Bob", text: "hey", group: true}},

		{name: "image with caption", evt: dm("M1", &waE2E.Message{ImageMessage: imageMsg}),
			want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "look at this",
				files: []adapters.FileRef{{Name: "image.jpg", MediaType: "image/jpeg", Size: 48213}}}},
		{name: "image in a group replying to the bot", evt: inGroup("M2", bobPN, &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
			Mimetype: proto.String("image/png"), FileLength: proto.Uint64(10),
			ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3EB0BOT"), Participant: proto.String(botPN.String())},
		}}), want: want{chat: groupJID.String(), user: bobPN.String(), name: "Bob", group: true, mentioned: true, replyTo: "3EB0BOT",
			files: []adapters.FileRef{{Name: "image.png", MediaType: "image/png", Size: 10}}}},
		{name: "document", evt: dm("M3", &waE2E.Message{DocumentMessage: documentMsg}),
			want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice",
				files: []adapters.FileRef{{Name: "invoice.pdf", MediaType: "application/pdf", Size: 120034}}}},
		{name: "document with caption and no name", evt: dm("M4", &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
			Caption: proto.String("the notes"), Mimetype: proto.String("text/plain; charset=utf-8"), FileLength: proto.Uint64(5),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "the notes",
			files: []adapters.FileRef{{Name: "document.txt", MediaType: "text/plain", Size: 5}}}},
		{name: "voice note", evt: dm("M5", &waE2E.Message{AudioMessage: &waE2E.AudioMessage{
			Mimetype: proto.String("audio/ogg; codecs=opus"), PTT: proto.Bool(true), FileLength: proto.Uint64(7000),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice",
			files: []adapters.FileRef{{Name: "voice.ogg", MediaType: "audio/ogg", Size: 7000}}}},
		{name: "video note", evt: dm("M6", &waE2E.Message{PtvMessage: &waE2E.VideoMessage{
			Mimetype: proto.String("video/mp4"), Seconds: proto.Uint32(6), FileLength: proto.Uint64(180000),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice",
			files: []adapters.FileRef{{Name: "video_note.mp4", MediaType: "video/mp4", Size: 180000, Seconds: 6, Spoken: true}}}},
		{name: "location", evt: dm("M7", &waE2E.Message{LocationMessage: &waE2E.LocationMessage{
			DegreesLatitude: proto.Float64(52.520008), DegreesLongitude: proto.Float64(13.404954),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[shared a location: 52.520008, 13.404954]"}},
		{name: "place", evt: dm("M8", &waE2E.Message{LocationMessage: &waE2E.LocationMessage{
			DegreesLatitude: proto.Float64(51.5007), DegreesLongitude: proto.Float64(-0.1246), Name: proto.String("Big Ben"), Address: proto.String("London SW1A 0AA"),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[shared a place: Big Ben, London SW1A 0AA (51.500700, -0.124600)]"}},
		{name: "live location", evt: dm("M9", &waE2E.Message{LiveLocationMessage: &waE2E.LiveLocationMessage{
			DegreesLatitude: proto.Float64(48.8584), DegreesLongitude: proto.Float64(2.2945),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[shared a live location (where they were when they shared it): 48.858400, 2.294500]"}},
		{name: "a live location moving on", evt: dm("M9b", &waE2E.Message{LiveLocationMessage: &waE2E.LiveLocationMessage{
			DegreesLatitude: proto.Float64(48.8585), DegreesLongitude: proto.Float64(2.2946), SequenceNumber: proto.Int64(3),
		}}), skip: "no text or file"},
		{name: "contact", evt: dm("M10", &waE2E.Message{ContactMessage: &waE2E.ContactMessage{DisplayName: proto.String("Bob Stone"),
			Vcard: proto.String("BEGIN:VCARD\nVERSION:3.0\nFN:Bob Stone\nitem1.TEL;waid=441234567890:+44 1234 567890\nitem1.X-ABLabel:Mobile\nTEL;type=WORK:+44 20 7946 0000\nEND:VCARD")}}),
			want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[shared a contact: Bob Stone, +44 1234 567890, +44 20 7946 0000]"}},
		{name: "sticker", evt: dm("M12", &waE2E.Message{StickerMessage: &waE2E.StickerMessage{
			Mimetype: proto.String("image/webp"), FileLength: proto.Uint64(9000), Emojis: proto.String("👍"),
		}}), want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[sent a sticker: 👍]",
			files: []adapters.FileRef{{Name: "sticker.webp", MediaType: "image/webp", Size: 9000}}}},
		{name: "contacts", evt: dm("M11", &waE2E.Message{ContactsArrayMessage: &waE2E.ContactsArrayMessage{Contacts: []*waE2E.ContactMessage{
			{DisplayName: proto.String("Ann"), Vcard: proto.String("BEGIN:VCARD\nTEL:+1 555 0100\nEND:VCARD")}, {DisplayName: proto.String("Cy")}}}}),
			want: want{chat: alicePN.String(), user: alicePN.String(), name: "Alice", text: "[shared a contact: Ann, +1 555 0100]\n[shared a contact: Cy]"}},

		{name: "own message", evt: withInfo(dm("S1", text("sent from my phone")), func(i *types.MessageInfo) { i.IsFromMe = true }), skip: "own message"},
		{name: "status broadcast", evt: withInfo(dm("S2", text("my status")), func(i *types.MessageInfo) { i.Chat = types.StatusBroadcastJID }), skip: "status update"},
		{name: "channel post", evt: withInfo(dm("S3", text("news")), func(i *types.MessageInfo) {
			i.Chat = types.NewJID("120363111", types.NewsletterServer)
		}), skip: "channel post"},
		{name: "protocol message", evt: dm("S4", &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
			Type: waE2E.ProtocolMessage_REVOKE.Enum(),
		}}), skip: "protocol message"},
		{name: "edit", evt: func() *events.Message { e := dm("S5", text("fixed typo")); e.IsEdit = true; return e }(), skip: "edit or deletion"},
		{name: "reaction", evt: dm("S6", &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{Text: proto.String("👍")}}), skip: "no text or file"},
		{name: "blank text", evt: dm("S7", text("  ")), skip: "no text or file"},
		{name: "no message", evt: &events.Message{Info: types.MessageInfo{ID: "S8"}}, skip: "empty message"},
	}
	fc := newFakeClient()
	fc.lids[aliceLID] = alicePN
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, skip := convert(context.Background(), "wa", fc, tc.evt)
			if skip != tc.skip {
				t.Fatalf("skip %q, want %q (inbound %+v)", skip, tc.skip, in)
			}
			if tc.skip != "" {
				return
			}
			w := tc.want
			if in.Adapter != "wa" || in.Surface != "whatsapp" || in.MessageID != tc.evt.Info.ID || !in.Time.Equal(msgTime) {
				t.Errorf("envelope %+v", in)
			}
			if in.ChatID != w.chat || in.UserID != w.user || in.DisplayName != w.name || in.Text != w.text ||
				in.ReplyTo != w.replyTo || in.Group != w.group || in.Mentioned != w.mentioned {
				t.Errorf("got chat %q user %q name %q text %q reply %q group %v mentioned %v\nwant %+v",
					in.ChatID, in.UserID, in.DisplayName, in.Text, in.ReplyTo, in.Group, in.Mentioned, w)
			}
			if len(in.Files) != len(w.files) {
				t.Fatalf("files %+v, want %+v", in.Files, w.files)
			}
			for i, f := range in.Files {
				if !strings.HasPrefix(f.ID, "wa1.") || !strings.Contains(f.ID, "."+tc.evt.Info.ID+".") {
					t.Errorf("file id %q", f.ID)
				}
				f.ID = ""
				if !reflect.DeepEqual(f, w.files[i]) {
					t.Errorf("file %+v, want %+v", f, w.files[i])
				}
			}
			if err := in.Validate(); err != nil {
				t.Errorf("the gateway would refuse it: %v", err)
			}
		})
	}
}

func TestMediaReferenceRoundTrip(t *testing.T) {
	in, _ := convert(context.Background(), "wa", newFakeClient(), dm("M1", &waE2E.Message{ImageMessage: imageMsg}))
	m, err := decodeMedia(in.Files[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	img, ok := m.(*waE2E.ImageMessage)
	if !ok {
		t.Fatalf("decoded a %T", m)
	}
	if img.GetDirectPath() != imageMsg.GetDirectPath() || !bytes.Equal(img.GetMediaKey(), imageMsg.GetMediaKey()) ||
		!bytes.Equal(img.GetFileSHA256(), imageMsg.GetFileSHA256()) || !bytes.Equal(img.GetFileEncSHA256(), imageMsg.GetFileEncSHA256()) {
		t.Fatalf("decoded %v", img)
	}
	if img.GetCaption() != "" {
		t.Fatal("the reference carries more than the download needs")
	}
	doc, _ := convert(context.Background(), "wa", newFakeClient(), dm("M3", &waE2E.Message{DocumentMessage: documentMsg}))
	if m, err := decodeMedia(doc.Files[0].ID); err != nil || reflect.TypeOf(m) != reflect.TypeOf(&waE2E.DocumentMessage{}) {
		t.Fatalf("document decoded as %T, %v", m, err)
	}
	for _, bad := range []string{"", "AgADBAAD", "wa1.image.X", "wa1.gif.X.AA", "wa1.image.X.!!", "wa2.image.X.AA"} {
		if _, err := decodeMedia(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestParseChatID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"4915123456789@s.whatsapp.net", "4915123456789@s.whatsapp.net"},
		{" 4915123456789@s.whatsapp.net ", "4915123456789@s.whatsapp.net"},
		{"120363000000000001@g.us", "120363000000000001@g.us"},
		{"200000000000002@lid", "200000000000002@lid"},
		{"4915123456789@c.us", "4915123456789@s.whatsapp.net"},
		{"4915123456789", "4915123456789@s.whatsapp.net"},
		{"+49 151 23456789", "4915123456789@s.whatsapp.net"},
	}
	for _, tc := range tests {
		got, err := parseChatID(tc.in)
		if err != nil || got.String() != tc.want {
			t.Errorf("parseChatID(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "empty"},
		{"alice", "digits"},
		{"015123456789", "starts with 0"},
		{"@s.whatsapp.net", "no user part"},
		{"4915123456789:3@s.whatsapp.net", "names one device"},
		{"status@broadcast", `server "broadcast"`},
		{"120363111@newsletter", `server "newsletter"`},
		{"1.2.3@s.whatsapp.net", "4915123456789@s.whatsapp.net"},
	}
	for _, tc := range bad {
		_, err := parseChatID(tc.in)
		if !errors.Is(err, ErrBadChatID) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseChatID(%q) error %v; want ErrBadChatID mentioning %q", tc.in, err, tc.want)
		}
	}
}

// A chat id the adapter made is one Send can send to: the same JID.
func TestChatIDRoundTrip(t *testing.T) {
	fc := newFakeClient()
	for _, evt := range []*events.Message{dm("R1", text("a")), inGroup("R2", bobPN, text("b"))} {
		in, skip := convert(context.Background(), "wa", fc, evt)
		if skip != "" {
			t.Fatal(skip)
		}
		jid, err := parseChatID(in.ChatID)
		if err != nil || jid != evt.Info.Chat.ToNonAD() {
			t.Fatalf("chat %q parsed to %v, %v; want %v", in.ChatID, jid, err, evt.Info.Chat)
		}
		user, err := parseChatID(in.UserID)
		if err != nil || user != evt.Info.Sender.ToNonAD() {
			t.Fatalf("user %q parsed to %v, %v", in.UserID, user, err)
		}
	}
}

// An edit (a protocol message of type MESSAGE_EDIT, as whatsmeow unwraps
// it) is a message of its own with the new text, naming the one it edits;
// a deletion is still skipped.
func TestConvertEdit(t *testing.T) {
	edit := dm("E2", &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
		Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), Key: &waCommon.MessageKey{ID: proto.String("A1")},
		EditedMessage: text("hello, fixed"),
	}})
	edit.IsEdit, edit.Info.Edit = true, types.EditAttributeMessageEdit
	in, skip := convert(context.Background(), "wa", newFakeClient(), edit)
	if skip != "" || in.Edits != "A1" || in.MessageID != "A1:edit:E2" || in.Text != "hello, fixed" || in.ChatID != alicePN.String() {
		t.Fatalf("edit converted to %+v (skip %q)", in, skip)
	}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	revoke := dm("E3", &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_REVOKE.Enum(),
		Key: &waCommon.MessageKey{ID: proto.String("A1")}}})
	revoke.Info.Edit = types.EditAttributeSenderRevoke
	if _, skip := convert(context.Background(), "wa", newFakeClient(), revoke); skip != "edit or deletion" {
		t.Fatalf("a deletion: skip %q", skip)
	}
}
