package discord

import (
	"slices"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/internal/lazyregexp"
)

// Surface is the Inbound surface of every Discord message; session keys
// read "discord:<channel id>".
const Surface = "discord"

// toInbound converts a MESSAGE_CREATE. ok is false for what the gateway
// should not see: the bot's own messages, other bots' and webhooks',
// system messages (joins, pins, thread notices), and messages with neither
// text nor attachments.
//
// ChatID is the channel id, which is what a conversation is on Discord: a
// DM channel, a guild text channel, or a thread (threads have channel ids
// of their own, so each is its own session).
//
// botRole is the bot's own role in the message's guild (Discord makes one
// for each bot it adds; "" when unknown): people often address the bot by
// it, picking the role rather than the user from the mention list.
func toInbound(id adapters.ID, botID, botRole string, m *discordgo.Message) (adapters.Inbound, bool) {
	if m == nil || m.Author == nil || m.ID == "" || m.ChannelID == "" {
		return adapters.Inbound{}, false
	}
	if m.Author.Bot || m.Author.System || m.WebhookID != "" || (botID != "" && m.Author.ID == botID) {
		return adapters.Inbound{}, false
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return adapters.Inbound{}, false
	}
	in := adapters.Inbound{
		Adapter:     id,
		Surface:     Surface,
		ChatID:      m.ChannelID,
		UserID:      m.Author.ID,
		DisplayName: displayName(m),
		Group:       m.GuildID != "",
		MessageID:   m.ID,
		Files:       fileRefs(m.Attachments),
		Time:        m.Timestamp,
	}
	mentioned := false
	for _, u := range m.Mentions {
		if u != nil && botID != "" && u.ID == botID {
			mentioned = true
		}
	}
	content := m.Content
	if botRole != "" && botID != "" && slices.Contains(m.MentionRoles, botRole) {
		mentioned = true
		// Addressed like a mention of the bot, and cleaned like one.
		content = strings.ReplaceAll(content, "<@&"+botRole+">", "<@"+botID+">")
	}
	if ref := m.MessageReference; m.Type == discordgo.MessageTypeReply && ref != nil &&
		ref.Type == discordgo.MessageReferenceTypeDefault && ref.MessageID != "" {
		in.ReplyTo = ref.MessageID
		if r := m.ReferencedMessage; r != nil && r.Author != nil && botID != "" && r.Author.ID == botID {
			mentioned = true // a reply to the bot addresses it, pinged or not
		}
	}
	if in.Group {
		in.Mentioned = mentioned
	}
	in.Text = cleanText(content, botID, m.Mentions)
	if in.Text == "" && len(in.Files) == 0 {
		return adapters.Inbound{}, false
	}
	return in, true
}

// displayName is what the sender is called where the message was sent:
// their server nickname, else their display name, else their username.
func displayName(m *discordgo.Message) string {
	if m.Member != nil && m.Member.Nick != "" {
		return m.Member.Nick
	}
	if m.Author.GlobalName != "" {
		return m.Author.GlobalName
	}
	return m.Author.Username
}

// fileRefs lists attachments as references, at most adapters.MaxFiles
// (Discord allows 10 per message); nothing is downloaded.
func fileRefs(atts []*discordgo.MessageAttachment) []adapters.FileRef {
	var out []adapters.FileRef
	for _, a := range atts {
		if a == nil || a.ID == "" {
			continue
		}
		if len(out) == adapters.MaxFiles {
			break
		}
		out = append(out, adapters.FileRef{
			ID:        a.ID,
			Name:      a.Filename,
			MediaType: a.ContentType,
			Size:      int64(a.Size),
			URL:       a.URL,
		})
	}
	return out
}

// userMention matches a user mention token, <@id> or the older <@!id>.
var userMention = lazyregexp.New(`<@!?([0-9]+)>`)

// cleanText removes the mentions of the bot (the way it is addressed, not
// part of what is said; a leading "<@bot>, " goes with its comma), and
// writes other users' mentions as @name, which a model can read.
func cleanText(text, botID string, mentions []*discordgo.User) string {
	names := map[string]string{}
	for _, u := range mentions {
		if u == nil {
			continue
		}
		name := u.GlobalName
		if name == "" {
			name = u.Username
		}
		if name != "" {
			names[u.ID] = name
		}
	}
	var b strings.Builder
	rest := text
	for {
		loc := userMention.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			break
		}
		id := rest[loc[2]:loc[3]]
		before, after := rest[:loc[0]], rest[loc[1]:]
		switch {
		case botID != "" && id == botID:
			before = strings.TrimRight(before, " \t")
			if strings.TrimSpace(b.String()+before) == "" {
				// Addressing at the start: "<@bot>, do this" → "do this".
				after = strings.TrimLeft(after, ",:;")
			}
			after = strings.TrimLeft(after, " \t")
			b.WriteString(before)
			if before != "" && after != "" && !strings.HasSuffix(before, "\n") && !strings.HasPrefix(after, "\n") {
				b.WriteByte(' ')
			}
		case names[id] != "":
			b.WriteString(before)
			b.WriteString("@" + names[id])
		default:
			b.WriteString(before)
			b.WriteString(rest[loc[0]:loc[1]])
		}
		rest = after
	}
	return strings.TrimSpace(b.String())
}
