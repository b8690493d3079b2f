package telegram

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters"
	tt "github.com/parleyd/parley/adapters/telegram/telegramtest"
)

func TestToInbound(t *testing.T) {
	me := identity{id: tt.BotID, username: tt.BotUsername}
	ann := tt.User{ID: 42, FirstName: "Ann", LastName: "Lee", Username: "ann"}
	bob := tt.User{ID: 43, FirstName: "Bob"}
	otherBot := tt.User{ID: 99, IsBot: true, FirstName: "Other", Username: "other_bot"}
	group := tt.Group(-4001, "Friends")
	forum := tt.Supergroup(-1001234, "Forum", true)
	botMsg := &tt.Message{MessageID: 7, From: &tt.Bot, Chat: group, Date: 1}
	msg := func(chat tt.Chat, from tt.User, text string, mod ...func(*tt.Message)) tt.Update {
		m := &tt.Message{MessageID: 10, From: &from, Chat: chat, Date: 1700000000, Text: text}
		for _, f := range mod {
			f(m)
		}
		return tt.Update{UpdateID: 1, Message: m}
	}
	entity := func(typ, part string) func(*tt.Message) {
		return func(m *tt.Message) { m.Entities = append(m.Entities, tt.EntityFor(typ, m.Text, part)) }
	}
	inTopic := func(thread int) func(*tt.Message) {
		return func(m *tt.Message) {
			m.MessageThreadID, m.IsTopicMessage = thread, true
			m.ReplyToMessage = &tt.Message{MessageID: thread, From: &bob, Chat: forum, ForumTopicCreated: json.RawMessage(`{"name":"Ideas","icon_color":7322096}`)}
		}
	}
	base := func(chat string, user string, text string) adapters.Inbound {
		return adapters.Inbound{Adapter: "tg", Surface: "telegram", ChatID: chat, UserID: user, DisplayName: "Ann Lee",
			MessageID: "10", Text: text, Time: time.Unix(1700000000, 0)}
	}
	with := func(in adapters.Inbound, f func(*adapters.Inbound)) adapters.Inbound { f(&in); return in }

	tests := []struct {
		name string
		u    tt.Update
		want adapters.Inbound
		skip bool
	}{
		{name: "private chat", u: msg(tt.PrivateChat(ann), ann, "hello"), want: base("42", "42", "hello")},
		{name: "group, no mention", u: msg(group, ann, "hi all"),
			want: with(base("-4001", "42", "hi all"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "group, @mention", u: msg(group, ann, "hey @Parley_Test_Bot look", entity("mention", "@Parley_Test_Bot")),
			want: with(base("-4001", "42", "hey @Parley_Test_Bot look"), func(in *adapters.Inbound) { in.Group, in.Mentioned = true, true })},
		{name: "group, mention after emoji (UTF-16 offsets)", u: msg(group, ann, "👋🏽 @parley_test_bot", entity("mention", "@parley_test_bot")),
			want: with(base("-4001", "42", "👋🏽 @parley_test_bot"), func(in *adapters.Inbound) { in.Group, in.Mentioned = true, true })},
		{name: "group, another bot mentioned", u: msg(group, ann, "@other_bot do it", entity("mention", "@other_bot")),
			want: with(base("-4001", "42", "@other_bot do it"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "group, mention text without an entity", u: msg(group, ann, "write to @parley_test_bot"),
			want: with(base("-4001", "42", "write to @parley_test_bot"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "group, /cmd@bot", u: msg(group, ann, "/status@parley_test_bot", entity("bot_command", "/status@parley_test_bot")),
			want: with(base("-4001", "42", "/status@parley_test_bot"), func(in *adapters.Inbound) { in.Group, in.Mentioned = true, true })},
		{name: "group, /cmd@otherbot", u: msg(group, ann, "/status@other_bot", entity("bot_command", "/status@other_bot")),
			want: with(base("-4001", "42", "/status@other_bot"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "group, bare /cmd", u: msg(group, ann, "/reset", entity("bot_command", "/reset")),
			want: with(base("-4001", "42", "/reset"), func(in *adapters.Inbound) { in.Group, in.Mentioned = true, true })},
		{name: "group, text_mention of the bot", u: msg(group, ann, "Parley, hi", func(m *tt.Message) {
			e := tt.EntityFor("text_mention", m.Text, "Parley")
			e.User = &tt.Bot
			m.Entities = []tt.Entity{e}
		}), want: with(base("-4001", "42", "Parley, hi"), func(in *adapters.Inbound) { in.Group, in.Mentioned = true, true })},
		{name: "group, reply to the bot", u: msg(group, ann, "and then?", func(m *tt.Message) { m.ReplyToMessage = botMsg }),
			want: with(base("-4001", "42", "and then?"), func(in *adapters.Inbound) { in.Group, in.Mentioned, in.ReplyTo = true, true, "7" })},
		{name: "group, reply to someone else", u: msg(group, ann, "agreed", func(m *tt.Message) {
			m.ReplyToMessage = &tt.Message{MessageID: 8, From: &otherBot, Chat: group}
		}), want: with(base("-4001", "42", "agreed"), func(in *adapters.Inbound) { in.Group, in.ReplyTo = true, "8" })},
		{name: "forum topic", u: msg(forum, ann, "in a topic", inTopic(55)),
			want: with(base("-1001234:topic:55", "42", "in a topic"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "forum topic, reply to the bot", u: msg(forum, ann, "yes", inTopic(55), func(m *tt.Message) {
			m.ReplyToMessage = &tt.Message{MessageID: 60, From: &tt.Bot, Chat: forum}
		}), want: with(base("-1001234:topic:55", "42", "yes"), func(in *adapters.Inbound) { in.Group, in.Mentioned, in.ReplyTo = true, true, "60" })},
		{name: "forum topic the bot opened is no mention", u: msg(forum, ann, "hi", inTopic(56), func(m *tt.Message) { m.ReplyToMessage.From = &tt.Bot }),
			want: with(base("-1001234:topic:56", "42", "hi"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "forum General topic", u: msg(forum, ann, "general"),
			want: with(base("-1001234", "42", "general"), func(in *adapters.Inbound) { in.Group = true })},
		{name: "reply thread in a plain supergroup is not a topic", u: msg(tt.Supergroup(-1005, "SG", false), ann, "re", func(m *tt.Message) {
			m.MessageThreadID = 3
			m.ReplyToMessage = &tt.Message{MessageID: 3, From: &bob}
		}), want: with(base("-1005", "42", "re"), func(in *adapters.Inbound) { in.Group, in.ReplyTo = true, "3" })},
		{name: "photo with caption mentioning the bot", u: msg(group, ann, "", func(m *tt.Message) {
			m.Caption = "look @parley_test_bot"
			m.CaptionEntities = []tt.Entity{tt.EntityFor("mention", m.Caption, "@parley_test_bot")}
			m.Photo = []tt.PhotoSize{{FileID: "small", Width: 90, Height: 60, FileSize: 900}, {FileID: "big", Width: 1280, Height: 853, FileSize: 120000}, {FileID: "mid", Width: 320, Height: 213, FileSize: 9000}}
		}), want: with(base("-4001", "42", "look @parley_test_bot"), func(in *adapters.Inbound) {
			in.Group, in.Mentioned = true, true
			in.Files = []adapters.FileRef{{ID: "big", Name: "photo.jpg", MediaType: "image/jpeg", Size: 120000}}
		})},
		{name: "document without caption", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Document = &tt.Document{FileID: "doc1", FileName: "report.pdf", MimeType: "application/pdf", FileSize: 52344}
		}), want: with(base("42", "42", ""), func(in *adapters.Inbound) {
			in.Files = []adapters.FileRef{{ID: "doc1", Name: "report.pdf", MediaType: "application/pdf", Size: 52344}}
		})},
		{name: "anonymous admin", u: msg(group, tt.User{ID: 1087968824, IsBot: true, FirstName: "Group", Username: "GroupAnonymousBot"}, "from the admins", func(m *tt.Message) {
			m.SenderChat = &group
		}), want: with(base("-4001", "-4001", "from the admins"), func(in *adapters.Inbound) { in.Group, in.DisplayName = true, "Friends" })},
		{name: "sticker", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Sticker = &tt.Sticker{FileID: "st1", Type: "regular", Width: 512, Height: 512, Emoji: "👍"}
		}), want: base("42", "42", "[sent a sticker: 👍]")},
		{name: "location", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Location = &tt.Location{Latitude: 52.520008, Longitude: 13.404954}
		}), want: base("42", "42", "[shared a location: 52.520008, 13.404954]")},
		{name: "live location", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Location = &tt.Location{Latitude: 48.8584, Longitude: 2.2945, LivePeriod: 900}
		}), want: base("42", "42", "[shared a live location (where they were when they shared it): 48.858400, 2.294500]")},
		{name: "a live location moving is no edit", skip: true, u: tt.Update{UpdateID: 1, EditedMessage: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Location, m.EditDate = &tt.Location{Latitude: 48.8585, Longitude: 2.2946, LivePeriod: 900}, 1700000060
		}).Message}},
		{name: "venue", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Venue = &tt.Venue{Location: tt.Location{Latitude: 51.5007, Longitude: -0.1246}, Title: "Big Ben", Address: "London SW1A 0AA"}
			m.Location = &m.Venue.Location
		}), want: base("42", "42", "[shared a place: Big Ben, London SW1A 0AA (51.500700, -0.124600)]")},
		{name: "contact", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.Contact = &tt.Contact{PhoneNumber: "+441234567890", FirstName: "Bob", LastName: "Stone"}
		}), want: base("42", "42", "[shared a contact: Bob Stone, +441234567890]")},
		{name: "video note", u: msg(tt.PrivateChat(ann), ann, "", func(m *tt.Message) {
			m.VideoNote = &tt.VideoNote{FileID: "vn1", Length: 384, Duration: 7, FileSize: 210000}
		}), want: with(base("42", "42", ""), func(in *adapters.Inbound) {
			in.Files = []adapters.FileRef{{ID: "vn1", Name: "video_note.mp4", MediaType: "video/mp4", Size: 210000, Seconds: 7, Spoken: true}}
		})},
		{name: "poll", skip: true, u: msg(tt.PrivateChat(ann), ann, "")},
		{name: "service message", skip: true, u: msg(group, ann, "", func(m *tt.Message) { m.NewChatMembers = []tt.User{bob} })},
		{name: "edited message", u: tt.Update{UpdateID: 1, EditedMessage: msg(tt.PrivateChat(ann), ann, "fixed", func(m *tt.Message) { m.EditDate = 1700000060 }).Message},
			want: with(base("42", "42", "fixed"), func(in *adapters.Inbound) { in.MessageID, in.Edits = "10:edit:1700000060", "10" })},
		{name: "channel post", skip: true, u: tt.Update{UpdateID: 1, ChannelPost: &tt.Message{MessageID: 1, Chat: tt.Chat{ID: -1009, Type: "channel"}, Text: "news"}}},
		{name: "callback query", skip: true, u: tt.Update{UpdateID: 1, CallbackQuery: json.RawMessage(`{"id":"1","from":{"id":42,"is_bot":false,"first_name":"Ann"},"data":"x"}`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.u)
			if err != nil {
				t.Fatal(err)
			}
			var u update
			if err := json.Unmarshal(raw, &u); err != nil {
				t.Fatal(err)
			}
			got, ok := toInbound("tg", me, &u)
			if ok == tc.skip {
				t.Fatalf("taken = %v, want %v (%+v)", ok, !tc.skip, got)
			}
			if tc.skip {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseChatID(t *testing.T) {
	tests := []struct {
		in     string
		chat   string
		thread int
		bad    bool
	}{
		{in: "42", chat: "42"},
		{in: "-1001234:topic:55", chat: "-1001234", thread: 55},
		{in: "@channel", chat: "@channel"},
		{in: "-1001234:topic:x", bad: true},
		{in: "-1001234:topic:0", bad: true},
		{in: "", bad: true},
	}
	for _, tc := range tests {
		chat, thread, err := parseChatID(tc.in)
		if (err != nil) != tc.bad || chat != tc.chat || thread != tc.thread {
			t.Errorf("parseChatID(%q) = %q, %d, %v", tc.in, chat, thread, err)
		}
	}
}
