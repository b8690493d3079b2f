package telegramtest

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Button is one inline keyboard button, as the Bot API takes it.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// CallbackQuery is a press on an inline keyboard button, as an update
// carries it.
type CallbackQuery struct {
	ID           string   `json:"id"`
	From         User     `json:"from"`
	Message      *Message `json:"message,omitempty"`
	ChatInstance string   `json:"chat_instance"`
	Data         string   `json:"data,omitempty"`
}

// CallbackAnswer is one answerCallbackQuery the fake accepted.
type CallbackAnswer struct {
	QueryID   string
	Text      string
	ShowAlert bool
}

// checkMarkup reads reply_markup as the Bot API does: an inline keyboard
// whose buttons have text and callback data of 1-64 bytes (or a URL).
// Empty means none.
func checkMarkup(raw string) ([][]Button, *apiError) {
	if raw == "" {
		return nil, nil
	}
	var m struct {
		InlineKeyboard [][]Button `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	for _, row := range m.InlineKeyboard {
		for _, b := range row {
			switch {
			case b.Text == "":
				return nil, badRequest("inline keyboard button text must be non-empty")
			case b.URL == "" && (len(b.CallbackData) == 0 || len(b.CallbackData) > 64):
				return nil, badRequest("BUTTON_DATA_INVALID")
			}
		}
	}
	if len(m.InlineKeyboard) == 0 {
		return nil, nil
	}
	return m.InlineKeyboard, nil
}

func sameButtons(a, b [][]Button) bool {
	return slices.EqualFunc(a, b, func(x, y []Button) bool { return slices.Equal(x, y) })
}

func (s *Server) setMarkupLocked(chatID string, id int, m [][]Button) {
	if s.markups[chatID] == nil {
		s.markups[chatID] = map[int][][]Button{}
	}
	if m == nil {
		delete(s.markups[chatID], id)
		return
	}
	s.markups[chatID][id] = m
}

func (s *Server) editMessageReplyMarkup(p url.Values) (any, *apiError) {
	chatID := p.Get("chat_id")
	id, _ := strconv.Atoi(p.Get("message_id"))
	markup, aerr := checkMarkup(p.Get("reply_markup"))
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	text, ok := s.texts[chatID][id]
	switch {
	case !ok:
		return nil, badRequest("message to edit not found")
	case sameButtons(s.markups[chatID][id], markup):
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	s.setMarkupLocked(chatID, id, markup)
	s.edits = append(s.edits, EditedMessage{ChatID: chatID, MessageID: id, Text: text})
	s.broadcast()
	return sentMessage(id, chatID, 0, text), nil
}

func (s *Server) answerCallbackQuery(p url.Values) *apiError {
	id := p.Get("callback_query_id")
	text := p.Get("text")
	if len([]rune(text)) > 200 {
		return badRequest("MESSAGE_TOO_LONG")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.callbacks[id] {
		return badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	delete(s.callbacks, id)
	s.answers = append(s.answers, CallbackAnswer{QueryID: id, Text: text, ShowAlert: p.Get("show_alert") == "true"})
	s.broadcast()
	return nil
}

// Press queues the update of user userID pressing the button with data
// under message messageID of chat chatID (a private chat when the two
// ids are equal, else a supergroup), and returns the callback query's id.
// Telegram sends a press whatever the data; the bot answers it with
// answerCallbackQuery.
func (s *Server) Press(chatID, userID int64, messageID int, data string) string {
	chat := Chat{ID: chatID, Type: "private", FirstName: "User"}
	if chatID != userID {
		chat = Chat{ID: chatID, Type: "supergroup", Title: "Group"}
	}
	s.mu.Lock()
	text := s.texts[strconv.FormatInt(chatID, 10)][messageID]
	s.nextQuery++
	id := strconv.Itoa(s.nextQuery)
	s.mu.Unlock()
	q := CallbackQuery{ID: id, From: User{ID: userID, FirstName: "User", Username: "user" + strconv.FormatInt(userID, 10)},
		Message:      &Message{MessageID: messageID, From: &Bot, Chat: chat, Date: time.Now().Unix(), Text: text},
		ChatInstance: "ci" + strconv.FormatInt(chatID, 10), Data: data}
	raw, err := json.Marshal(q)
	if err != nil {
		panic("telegramtest: " + err.Error())
	}
	s.Inject(Update{CallbackQuery: raw})
	return id
}

// Buttons returns the inline keyboard under a message now, row by row.
func (s *Server) Buttons(chatID string, messageID int) [][]Button {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.markups[chatID][messageID]
}

// CallbackAnswers returns the answerCallbackQuery calls so far.
func (s *Server) CallbackAnswers() []CallbackAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.answers)
}
