package telegramtest

import (
	"context"
	"io"
	"net/http"
	"strconv"
)

// SentFile is one sendDocument, sendPhoto or sendVoice the fake accepted,
// with the bytes it was given.
type SentFile struct {
	Method    string // sendDocument, sendPhoto or sendVoice
	MessageID int
	ChatID    string
	ThreadID  int
	FileName  string
	Data      []byte
	Caption   string
	ReplyTo   int
}

// fileFields are the form fields each upload method takes its file in.
var fileFields = map[string]string{"sendDocument": "document", "sendPhoto": "photo", "sendVoice": "voice"}

// sendFile answers an upload as the Bot API does: the file must come as a
// multipart part (or a file_id string, which the fake doesn't take).
func (s *Server) sendFile(method string, r *http.Request) (any, *apiError) {
	p := r.Form
	chatID := p.Get("chat_id")
	if chatID == "" {
		return nil, badRequest("chat_id is empty")
	}
	field := fileFields[method]
	if r.MultipartForm == nil || len(r.MultipartForm.File[field]) != 1 {
		return nil, badRequest("there is no " + field + " in the request")
	}
	fh := r.MultipartForm.File[field][0]
	f, err := fh.Open()
	if err != nil {
		return nil, badRequest(err.Error())
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, badRequest(err.Error())
	}
	if len(data) == 0 {
		return nil, badRequest("file must be non-empty")
	}
	if len([]rune(p.Get("caption"))) > 1024 {
		return nil, badRequest("message caption is too long")
	}
	thread, _ := strconv.Atoi(p.Get("message_thread_id"))
	replyTo, _ := strconv.Atoi(p.Get("reply_to_message_id"))
	s.mu.Lock()
	id := s.nextMessageLocked(chatID)
	s.uploads = append(s.uploads, SentFile{Method: method, MessageID: id, ChatID: chatID, ThreadID: thread, FileName: fh.Filename,
		Data: data, Caption: p.Get("caption"), ReplyTo: replyTo})
	s.broadcast()
	s.mu.Unlock()
	m := sentMessage(id, chatID, thread, "")
	delete(m, "text")
	if c := p.Get("caption"); c != "" {
		m["caption"] = c
	}
	switch method {
	case "sendPhoto":
		m["photo"] = []map[string]any{{"file_id": "sent-photo-" + strconv.Itoa(id), "file_unique_id": "sp" + strconv.Itoa(id), "width": 1, "height": 1}}
	case "sendVoice":
		m["voice"] = map[string]any{"file_id": "sent-voice-" + strconv.Itoa(id), "file_unique_id": "sv" + strconv.Itoa(id), "duration": 1}
	default:
		m["document"] = map[string]any{"file_id": "sent-doc-" + strconv.Itoa(id), "file_unique_id": "sd" + strconv.Itoa(id), "file_name": fh.Filename}
	}
	return m, nil
}

// Files returns the files sent so far (documents, photos and voice notes).
func (s *Server) Files() []SentFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentFile(nil), s.uploads...)
}

// WaitFiles waits until at least n files were sent and returns them.
func (s *Server) WaitFiles(ctx context.Context, n int) ([]SentFile, error) {
	err := s.WaitFor(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.uploads) >= n
	})
	return s.Files(), err
}
