package telegramtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// apiError is the Bot API's error answer.
type apiError struct {
	code       int
	desc       string
	retryAfter int
	migrateTo  int64
}

func badRequest(desc string) *apiError { return &apiError{code: 400, desc: "Bad Request: " + desc} }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, r, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	s.mu.Lock()
	s.calls[method]++
	var fail *Failure
	if fs := s.failures[method]; len(fs) > 0 {
		fail = &fs[0]
		s.failures[method] = fs[1:]
	}
	s.broadcast()
	s.mu.Unlock()
	if fail != nil {
		if fail.Drop {
			dropConnection(w)
			return
		}
		writeError(w, &apiError{code: fail.Code, desc: fail.Description, retryAfter: fail.RetryAfter, migrateTo: fail.MigrateTo})
		return
	}
	if token != s.Token {
		writeError(w, &apiError{code: 401, desc: "Unauthorized"})
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeError(w, badRequest(err.Error()))
		return
	}
	var result any
	var aerr *apiError
	switch method {
	case "getMe":
		result = Bot
	case "getUpdates":
		s.getUpdates(w, r, params)
		return
	case "sendMessage":
		result, aerr = s.sendMessage(params)
	case "editMessageText":
		result, aerr = s.editMessageText(params)
	case "sendDocument", "sendPhoto", "sendVoice":
		result, aerr = s.sendFile(method, r)
	case "sendChatAction":
		aerr = s.sendChatAction(params)
		result = true
	case "setMessageReaction":
		aerr = s.setMessageReaction(params)
		result = true
	case "setWebhook":
		aerr = s.setWebhook(params)
		result = true
	case "deleteWebhook":
		s.mu.Lock()
		s.webhook = WebhookInfo{}
		if params.Get("drop_pending_updates") == "true" {
			s.pending = nil
		}
		s.broadcast()
		s.mu.Unlock()
		result = true
	case "getWebhookInfo":
		s.mu.Lock()
		result = map[string]any{"url": s.webhook.URL, "has_custom_certificate": false, "pending_update_count": len(s.pending)}
		s.mu.Unlock()
	case "getFile":
		result, aerr = s.getFile(params)
	case "answerCallbackQuery":
		aerr = s.answerCallbackQuery(params)
		result = true
	case "editMessageReplyMarkup":
		result, aerr = s.editMessageReplyMarkup(params)
	default:
		aerr = &apiError{code: 404, desc: "Not Found"}
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p url.Values) {
	offset, _ := strconv.Atoi(p.Get("offset"))
	limit, _ := strconv.Atoi(p.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(p.Get("timeout"))
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()

	s.mu.Lock()
	s.polls = append(s.polls, Poll{Offset: offset, Limit: limit, Timeout: timeout, AllowedUpdates: p.Get("allowed_updates")})
	if s.webhook.URL != "" {
		s.mu.Unlock()
		writeError(w, &apiError{code: 409, desc: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
		return
	}
	if s.polling != nil {
		close(s.polling) // the poll in flight ends with 409
	}
	mine := make(chan struct{})
	s.polling = mine
	defer func() {
		s.mu.Lock()
		if s.polling == mine {
			s.polling = nil
		}
		s.mu.Unlock()
	}()
	if offset > 0 {
		n := 0
		for n < len(s.pending) && s.pending[n].id < offset {
			n++
		}
		s.pending = s.pending[n:]
		s.confirmed = max(s.confirmed, offset)
	}
	s.broadcast()
	for {
		var out [][]byte
		for _, u := range s.pending {
			if u.id >= offset {
				out = append(out, u.raw)
				if len(out) == limit {
					break
				}
			}
		}
		ch := s.changed
		if len(out) > 0 || timeout <= 0 {
			s.mu.Unlock()
			var b bytes.Buffer
			b.WriteString(`{"ok":true,"result":[`)
			b.Write(bytes.Join(out, []byte{','}))
			b.WriteString("]}")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b.Bytes())
			return
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			timeout = 0
		case <-mine:
			s.mu.Lock()
			s.conflicts = append(s.conflicts, time.Now())
			s.mu.Unlock()
			writeError(w, &apiError{code: 409, desc: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
			return
		case <-r.Context().Done():
			return
		case <-s.closing:
			timeout = 0
		}
		s.mu.Lock()
	}
}

func (s *Server) sendMessage(p url.Values) (any, *apiError) {
	chatID := p.Get("chat_id")
	if chatID == "" {
		return nil, badRequest("chat_id is empty")
	}
	text, err := checkText(p.Get("text"), p.Get("parse_mode"))
	if err != nil {
		return nil, err
	}
	thread, _ := strconv.Atoi(p.Get("message_thread_id"))
	replyTo, _ := strconv.Atoi(p.Get("reply_to_message_id"))
	markup, aerr := checkMarkup(p.Get("reply_markup"))
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	id := s.nextMessageLocked(chatID)
	s.setMarkupLocked(chatID, id, markup)
	s.sent = append(s.sent, SentMessage{MessageID: id, ChatID: chatID, ThreadID: thread, Text: p.Get("text"), ParseMode: p.Get("parse_mode"), ReplyTo: replyTo})
	if s.texts[chatID] == nil {
		s.texts[chatID] = map[int]string{}
	}
	s.texts[chatID][id] = p.Get("text")
	s.sentCount.Add(1)
	s.broadcast()
	s.mu.Unlock()
	return sentMessage(id, chatID, thread, text), nil
}

func (s *Server) editMessageText(p url.Values) (any, *apiError) {
	chatID := p.Get("chat_id")
	id, _ := strconv.Atoi(p.Get("message_id"))
	text, aerr := checkText(p.Get("text"), p.Get("parse_mode"))
	if aerr != nil {
		return nil, aerr
	}
	markup, aerr := checkMarkup(p.Get("reply_markup"))
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.texts[chatID][id]
	switch {
	case !ok:
		return nil, badRequest("message to edit not found")
	case old == p.Get("text") && sameButtons(s.markups[chatID][id], markup):
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	s.texts[chatID][id] = p.Get("text")
	// As Telegram does, an edit without reply_markup takes the buttons away.
	s.setMarkupLocked(chatID, id, markup)
	s.edits = append(s.edits, EditedMessage{ChatID: chatID, MessageID: id, Text: p.Get("text"), ParseMode: p.Get("parse_mode")})
	s.broadcast()
	return sentMessage(id, chatID, 0, text), nil
}

func (s *Server) sendChatAction(p url.Values) *apiError {
	if p.Get("chat_id") == "" {
		return badRequest("chat_id is empty")
	}
	if p.Get("action") == "" {
		return badRequest("action is empty")
	}
	thread, _ := strconv.Atoi(p.Get("message_thread_id"))
	s.mu.Lock()
	s.actions = append(s.actions, ChatAction{ChatID: p.Get("chat_id"), ThreadID: thread, Action: p.Get("action")})
	s.broadcast()
	s.mu.Unlock()
	return nil
}

func (s *Server) setWebhook(p url.Values) *apiError {
	u := p.Get("url")
	if u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://127.0.0.1") {
		return badRequest("bad webhook: An HTTPS URL must be provided for webhook")
	}
	s.mu.Lock()
	s.webhook = WebhookInfo{URL: u, SecretToken: p.Get("secret_token"), AllowedUpdates: p.Get("allowed_updates")}
	if p.Get("drop_pending_updates") == "true" {
		s.pending = nil
	}
	s.broadcast()
	s.mu.Unlock()
	return nil
}

func (s *Server) getFile(p url.Values) (any, *apiError) {
	id := p.Get("file_id")
	s.mu.Lock()
	data, ok := s.files[id]
	s.mu.Unlock()
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	return map[string]any{"file_id": id, "file_unique_id": "u" + id, "file_size": len(data), "file_path": "files/" + id}, nil
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, path, _ := strings.Cut(rest, "/")
	id, ok := strings.CutPrefix(path, "files/")
	s.mu.Lock()
	data, found := s.files[id]
	s.mu.Unlock()
	if token != s.Token || !ok || !found {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

// checkText refuses what Telegram refuses: empty text, text too long
// once formatting is parsed, and formatting it can't parse. It returns
// the text as shown.
func checkText(text, parseMode string) (string, *apiError) {
	shown := text
	switch strings.ToLower(parseMode) {
	case "":
	case "html":
		var err error
		if shown, err = CheckHTML(text); err != nil {
			return "", badRequest("can't parse entities: " + err.Error())
		}
	case "markdownv2":
		if err := CheckMarkdownV2(text); err != nil {
			return "", badRequest("can't parse entities: " + err.Error())
		}
	case "markdown":
	default:
		return "", badRequest("unsupported parse_mode")
	}
	if strings.TrimSpace(shown) == "" {
		return "", badRequest("message text is empty")
	}
	if len(utf16.Encode([]rune(shown))) > 4096 {
		return "", badRequest("message is too long")
	}
	return shown, nil
}

func sentMessage(id int, chatID string, thread int, text string) map[string]any {
	chatType := "private"
	if strings.HasPrefix(chatID, "-") {
		chatType = "supergroup"
	}
	n, _ := strconv.ParseInt(chatID, 10, 64)
	m := map[string]any{"message_id": id, "from": Bot, "chat": map[string]any{"id": n, "type": chatType},
		"date": time.Now().Unix(), "text": text}
	if thread != 0 {
		m["message_thread_id"] = thread
		m["is_topic_message"] = true
	}
	return m
}

// readParams reads a request's parameters: a query string, a form (as
// the library sends), a multipart form, or a JSON object.
func readParams(r *http.Request) (url.Values, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return nil, fmt.Errorf("can't parse JSON: %v", err)
		}
		v := r.URL.Query()
		for k, x := range m {
			switch x := x.(type) {
			case string:
				v.Set(k, x)
			default:
				b, _ := json.Marshal(x)
				v.Set(k, string(b))
			}
		}
		return v, nil
	case "multipart/form-data":
		if err := r.ParseMultipartForm(10 << 20); err != nil {
			return nil, err
		}
		return r.Form, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	return r.Form, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"ok": false, "error_code": e.code, "description": e.desc}
	params := map[string]any{}
	if e.retryAfter > 0 {
		params["retry_after"] = e.retryAfter
	}
	if e.migrateTo != 0 {
		params["migrate_to_chat_id"] = e.migrateTo
	}
	if len(params) > 0 {
		body["parameters"] = params
	}
	status := e.code
	if status < 400 || status > 599 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, body)
}

func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}
