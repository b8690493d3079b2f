package whatsapp

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"strings"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/parleyd/parley/adapters"
)

// Surface is the session surface of WhatsApp chats: a contact's session
// key is "whatsapp:<jid>", e.g. whatsapp:4915123456789@s.whatsapp.net.
const Surface = "whatsapp"

// convert turns a WhatsApp message into an Inbound. skip, when not empty,
// says why the message is not one for the gateway (the bot's own, a
// status update, a deletion, a protocol message, nothing to read). An edit
// is a message of its own whose Edits names the message it edits.
//
// ChatID is the chat's JID without a device part: a contact's phone-number
// JID ("4915123456789@s.whatsapp.net") or a group's ("1203…@g.us").
// UserID is the sender's JID. A contact WhatsApp addresses by LID
// ("…@lid") is given by phone number when WhatsApp told it, so one person
// is one session and allowlists can name numbers.
func convert(ctx context.Context, id adapters.ID, c client, evt *events.Message) (in adapters.Inbound, skip string) {
	if evt == nil || evt.Message == nil {
		return in, "empty message"
	}
	info := evt.Info
	msg, edits := evt.Message, ""
	if pm := msg.GetProtocolMessage(); pm.GetType() == waE2E.ProtocolMessage_MESSAGE_EDIT && pm.GetEditedMessage() != nil && pm.GetKey().GetID() != "" {
		// An edit: the new content of the message its key names.
		msg, edits = pm.GetEditedMessage(), pm.GetKey().GetID()
	}
	switch {
	case info.IsFromMe:
		return in, "own message"
	case info.Chat.User == types.StatusBroadcastJID.User && info.Chat.Server == types.StatusBroadcastJID.Server:
		return in, "status update"
	case info.Chat.Server == types.NewsletterServer:
		return in, "channel post"
	case edits == "" && (evt.IsEdit || info.Edit != types.EditAttributeEmpty):
		return in, "edit or deletion"
	case msg.GetProtocolMessage() != nil:
		return in, "protocol message"
	}
	text, files, ctxInfo := content(info.ID, msg)
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return in, "no text or file"
	}
	sender := canonical(ctx, c, info.Sender, info.SenderAlt)
	in = adapters.Inbound{
		Adapter:     id,
		Surface:     Surface,
		ChatID:      sender.String(),
		UserID:      sender.String(),
		DisplayName: info.PushName,
		MessageID:   info.ID,
		Text:        text,
		Files:       files,
		ReplyTo:     ctxInfo.GetStanzaID(),
		Time:        info.Timestamp,
	}
	if edits != "" {
		// Each edit is its own message, naming the one it edits.
		in.Edits, in.MessageID = edits, edits+":edit:"+info.ID
	}
	// IsGroup is set for broadcast lists too, whose messages belong in
	// the chat with their sender.
	if info.Chat.Server == types.GroupServer || (info.IsGroup && info.Chat.Server != types.BroadcastServer) {
		in.Group = true
		in.ChatID = info.Chat.ToNonAD().String()
		in.Mentioned = addressesMe(c, ctxInfo)
	}
	return in, ""
}

// content is a message's text (the body or a caption), its files and the
// context (reply, mentions) that came with it.
func content(msgID string, m *waE2E.Message) (text string, files []adapters.FileRef, ci *waE2E.ContextInfo) {
	text = m.GetConversation()
	if et := m.GetExtendedTextMessage(); et != nil {
		text, ci = et.GetText(), et.GetContextInfo()
	}
	caption := func(c string, info *waE2E.ContextInfo) {
		if text == "" {
			text = c
		}
		if ci == nil {
			ci = info
		}
	}
	if v := m.GetImageMessage(); v != nil {
		caption(v.GetCaption(), v.GetContextInfo())
		files = append(files, fileRef(msgID, "image", v, "", v.GetMimetype(), "image/jpeg", v.GetFileLength()))
	}
	if v := m.GetVideoMessage(); v != nil {
		caption(v.GetCaption(), v.GetContextInfo())
		files = append(files, fileRef(msgID, "video", v, "", v.GetMimetype(), "video/mp4", v.GetFileLength()))
	}
	if v := m.GetDocumentMessage(); v != nil {
		caption(v.GetCaption(), v.GetContextInfo())
		name := v.GetFileName()
		if name == "" {
			name = v.GetTitle()
		}
		files = append(files, fileRef(msgID, "document", v, name, v.GetMimetype(), "application/octet-stream", v.GetFileLength()))
	}
	if v := m.GetAudioMessage(); v != nil {
		caption("", v.GetContextInfo())
		base := "audio"
		if v.GetPTT() {
			base = "voice"
		}
		files = append(files, fileRef(msgID, "audio", v, base, v.GetMimetype(), "audio/ogg", v.GetFileLength()))
	}
	if v := m.GetStickerMessage(); v != nil {
		// A line as on Telegram, and the image a vision model sees.
		caption(adapters.SentSticker(strings.TrimSpace(v.GetEmojis())), v.GetContextInfo())
		files = append(files, fileRef(msgID, "sticker", v, "", v.GetMimetype(), "image/webp", v.GetFileLength()))
	}
	if v := m.GetPtvMessage(); v != nil {
		// A video note: someone talking to the camera, heard as a voice
		// note is.
		caption("", v.GetContextInfo())
		f := fileRef(msgID, "video", v, "video_note", v.GetMimetype(), "video/mp4", v.GetFileLength())
		f.Seconds, f.Spoken = int(v.GetSeconds()), true
		files = append(files, f)
	}
	if v := m.GetLocationMessage(); v != nil {
		line := adapters.SharedLocation(v.GetDegreesLatitude(), v.GetDegreesLongitude(), false)
		if v.GetName() != "" || v.GetAddress() != "" {
			line = adapters.SharedPlace(v.GetName(), v.GetAddress(), v.GetDegreesLatitude(), v.GetDegreesLongitude())
		}
		caption(line, v.GetContextInfo())
	}
	if v := m.GetLiveLocationMessage(); v != nil && v.GetSequenceNumber() == 0 {
		// The share itself; its moves after it (numbered) are no messages.
		caption(adapters.SharedLocation(v.GetDegreesLatitude(), v.GetDegreesLongitude(), true), v.GetContextInfo())
	}
	if v := m.GetContactMessage(); v != nil {
		caption(contactLine(v), v.GetContextInfo())
	}
	if v := m.GetContactsArrayMessage(); v != nil {
		var lines []string
		for _, c := range v.GetContacts() {
			lines = append(lines, contactLine(c))
		}
		caption(strings.Join(lines, "\n"), v.GetContextInfo())
	}
	return text, files, ci
}

// contactLine is the line a shared contact reads as: its name and the
// phone numbers its vCard gives.
func contactLine(c *waE2E.ContactMessage) string {
	var phones []string
	for line := range strings.SplitSeq(c.GetVcard(), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, _, _ := strings.Cut(key, ";")
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:] // "item1.TEL"
		}
		if ok && strings.EqualFold(name, "TEL") && strings.TrimSpace(value) != "" {
			phones = append(phones, strings.TrimSpace(value))
		}
	}
	return adapters.SharedContact(c.GetDisplayName(), phones...)
}

// fileRef describes one attachment. Its ID carries what a later download
// needs (the media's path on WhatsApp's servers, its key and hashes), so
// nothing is fetched until a tool or model asks (see Fetch).
func fileRef(msgID, kind string, m whatsmeow.DownloadableMessage, name, mediaType, defaultType string, size uint64) adapters.FileRef {
	mediaType, _, _ = strings.Cut(mediaType, ";")
	mediaType = strings.TrimSpace(mediaType)
	if mediaType == "" {
		mediaType = defaultType
	}
	if name == "" || !strings.Contains(name, ".") {
		if name == "" {
			name = kind
		}
		name += extension(mediaType)
	}
	return adapters.FileRef{
		ID:        encodeMedia(msgID, kind, m),
		Name:      name,
		MediaType: mediaType,
		Size:      int64(min(size, 1<<62)),
	}
}

// extension is the usual file extension of a media type.
func extension(mediaType string) string {
	switch mediaType {
	case "image/jpeg":
		return ".jpg"
	case "image/png":
		return ".png"
	case "image/webp":
		return ".webp"
	case "video/mp4":
		return ".mp4"
	case "audio/ogg":
		return ".ogg"
	case "audio/mpeg":
		return ".mp3"
	case "application/pdf":
		return ".pdf"
	case "text/plain":
		return ".txt"
	}
	if exts, _ := mime.ExtensionsByType(mediaType); len(exts) > 0 {
		return exts[0]
	}
	return ""
}

// Media references: "wa1.<kind>.<message id>.<base64url of the media's
// download fields>". Message ids are letters and digits and base64url has
// no ".", so the parts split cleanly.
const mediaRefPrefix = "wa1"

func encodeMedia(msgID, kind string, m whatsmeow.DownloadableMessage) string {
	var p proto.Message
	switch kind {
	case "image":
		p = &waE2E.ImageMessage{DirectPath: str(m.GetDirectPath()), MediaKey: m.GetMediaKey(), FileSHA256: m.GetFileSHA256(), FileEncSHA256: m.GetFileEncSHA256()}
	case "video":
		p = &waE2E.VideoMessage{DirectPath: str(m.GetDirectPath()), MediaKey: m.GetMediaKey(), FileSHA256: m.GetFileSHA256(), FileEncSHA256: m.GetFileEncSHA256()}
	case "document":
		p = &waE2E.DocumentMessage{DirectPath: str(m.GetDirectPath()), MediaKey: m.GetMediaKey(), FileSHA256: m.GetFileSHA256(), FileEncSHA256: m.GetFileEncSHA256()}
	case "audio":
		p = &waE2E.AudioMessage{DirectPath: str(m.GetDirectPath()), MediaKey: m.GetMediaKey(), FileSHA256: m.GetFileSHA256(), FileEncSHA256: m.GetFileEncSHA256()}
	case "sticker":
		p = &waE2E.StickerMessage{DirectPath: str(m.GetDirectPath()), MediaKey: m.GetMediaKey(), FileSHA256: m.GetFileSHA256(), FileEncSHA256: m.GetFileEncSHA256()}
	}
	b, _ := proto.Marshal(p)
	return strings.Join([]string{mediaRefPrefix, kind, msgID, base64.RawURLEncoding.EncodeToString(b)}, ".")
}

// decodeMedia reverses encodeMedia into the message whatsmeow downloads.
func decodeMedia(ref string) (whatsmeow.DownloadableMessage, error) {
	parts := strings.Split(ref, ".")
	if len(parts) != 4 || parts[0] != mediaRefPrefix {
		return nil, fmt.Errorf("file id %q is not a WhatsApp media reference", ref)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[3])
	if err != nil {
		return nil, fmt.Errorf("file id %q is not a WhatsApp media reference: %v", ref, err)
	}
	var m interface {
		proto.Message
		whatsmeow.DownloadableMessage
	}
	switch parts[1] {
	case "image":
		m = &waE2E.ImageMessage{}
	case "video":
		m = &waE2E.VideoMessage{}
	case "document":
		m = &waE2E.DocumentMessage{}
	case "audio":
		m = &waE2E.AudioMessage{}
	case "sticker":
		m = &waE2E.StickerMessage{}
	default:
		return nil, fmt.Errorf("file id %q names an unknown media kind %q", ref, parts[1])
	}
	if err := proto.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("file id %q is not a WhatsApp media reference: %v", ref, err)
	}
	return m, nil
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// canonical is jid without its device part, by phone number when it is a
// LID and the phone number is known (from the message or whatsmeow's
// LID map).
func canonical(ctx context.Context, c client, jid, alt types.JID) types.JID {
	jid = jid.ToNonAD()
	if jid.Server != types.HiddenUserServer {
		return jid
	}
	if alt.Server == types.DefaultUserServer {
		return alt.ToNonAD()
	}
	if pn := c.pnForLID(ctx, jid); pn.Server == types.DefaultUserServer {
		return pn.ToNonAD()
	}
	return jid
}

// addressesMe reports whether a group message mentions the linked
// account or replies to one of its messages.
func addressesMe(c client, ci *waE2E.ContextInfo) bool {
	if ci == nil {
		return false
	}
	pn, lid := c.ownJIDs()
	isMe := func(s string) bool {
		j, err := types.ParseJID(s)
		if err != nil || j.User == "" {
			return false
		}
		j = j.ToNonAD()
		return (!pn.IsEmpty() && j == pn) || (!lid.IsEmpty() && j == lid)
	}
	for _, m := range ci.GetMentionedJID() {
		if isMe(m) {
			return true
		}
	}
	return ci.GetStanzaID() != "" && isMe(ci.GetParticipant())
}

// parseChatID turns a ChatID back into the JID to send to: a contact's
// or group's JID, a LID, or a bare phone number ("+4915123456789").
func parseChatID(chatID string) (types.JID, error) {
	s := strings.TrimSpace(chatID)
	if s == "" {
		return types.EmptyJID, fmt.Errorf("%w: the chat id is empty", ErrBadChatID)
	}
	if !strings.Contains(s, "@") {
		user, err := phoneUser(s)
		if err != nil {
			return types.EmptyJID, fmt.Errorf("%w: %q %v; use a JID such as 4915123456789@s.whatsapp.net or 120363012345678901@g.us", ErrBadChatID, chatID, err)
		}
		return types.NewJID(user, types.DefaultUserServer), nil
	}
	jid, err := types.ParseJID(s)
	if err != nil {
		return types.EmptyJID, fmt.Errorf("%w: %q: %v; use a JID such as 4915123456789@s.whatsapp.net or 120363012345678901@g.us", ErrBadChatID, chatID, err)
	}
	switch {
	case jid.User == "":
		return types.EmptyJID, fmt.Errorf("%w: %q has no user part", ErrBadChatID, chatID)
	case jid.Device != 0 || jid.RawAgent != 0:
		return types.EmptyJID, fmt.Errorf("%w: %q names one device; use the chat's JID without the \":%d\"", ErrBadChatID, chatID, jid.Device)
	case jid.Server == types.DefaultUserServer || jid.Server == types.GroupServer || jid.Server == types.HiddenUserServer:
		return jid, nil
	case jid.Server == types.LegacyUserServer:
		return types.NewJID(jid.User, types.DefaultUserServer), nil
	}
	return types.EmptyJID, fmt.Errorf("%w: %q is on server %q; parley sends to contacts (@s.whatsapp.net, @lid) and groups (@g.us)", ErrBadChatID, chatID, jid.Server)
}
