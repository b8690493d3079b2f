// Package speechtest is a fake OpenAI-compatible audio server for tests:
// it transcribes by a table from the audio's bytes to text, and speaks
// every reply as the same audio bytes, recording what it was asked.
package speechtest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
)

// Server is the fake. Set its fields before the first request.
type Server struct {
	*httptest.Server
	// Transcripts maps an audio file's bytes to its text.
	Transcripts map[string]string
	// Fail, when set, answers every transcription with this status.
	Fail int
	// Audio is what every /audio/speech answers.
	Audio []byte

	connections atomic.Int64

	mu         sync.Mutex
	heard      []string // the audio of each transcription request
	files      []string // each transcription request's file name and type
	spoken     []string // the input of each speech request
	languages  []string
	authorized []string
}

// New starts a fake; it closes with the test.
func New(t interface{ Cleanup(func()) }) *Server {
	s := &Server{Transcripts: map[string]string{}, Audio: []byte("OggS fake opus audio")}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/audio/transcriptions", s.transcribe)
	mux.HandleFunc("POST /v1/audio/speech", s.speak)
	s.Server = httptest.NewUnstartedServer(mux)
	s.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.connections.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// Add maps audio to its transcript while the fake runs.
func (s *Server) Add(audio, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Transcripts[audio] = text
}

// BaseURL is the fake's API root, for speech.base_url.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

func (s *Server) transcribe(w http.ResponseWriter, r *http.Request) {
	f, fh, err := r.FormFile("file")
	if err != nil || r.FormValue("model") == "" {
		http.Error(w, `{"error":{"message":"file and model are required"}}`, http.StatusBadRequest)
		return
	}
	audio, _ := io.ReadAll(f)
	s.mu.Lock()
	s.heard = append(s.heard, string(audio))
	s.files = append(s.files, fh.Filename+" "+fh.Header.Get("Content-Type"))
	s.languages = append(s.languages, r.FormValue("language"))
	s.authorized = append(s.authorized, r.Header.Get("Authorization"))
	fail := s.Fail
	text, ok := s.Transcripts[string(audio)]
	s.mu.Unlock()
	if fail != 0 {
		http.Error(w, `{"error":{"message":"the model is overloaded"}}`, fail)
		return
	}
	if !ok {
		http.Error(w, `{"error":{"message":"could not decode audio"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"text": text})
}

func (s *Server) speak(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model, Voice, Input string
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Input == "" || req.Model == "" {
		http.Error(w, `{"error":{"message":"model and input are required"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.spoken = append(s.spoken, req.Input)
	audio := s.Audio
	s.mu.Unlock()
	w.Header().Set("Content-Type", "audio/ogg")
	_, _ = w.Write(audio)
}

// Files is each transcription request's file name and media type, as
// "name type", in order: what a provider tells the audio's format by.
func (s *Server) Files() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.files...)
}

// Connections is how many connections clients have opened to the fake.
func (s *Server) Connections() int { return int(s.connections.Load()) }

// Heard is the audio of each transcription request, in order.
func (s *Server) Heard() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.heard...)
}

// Spoken is the text of each speech request, in order.
func (s *Server) Spoken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.spoken...)
}

// Authorized is the Authorization header of each transcription request.
func (s *Server) Authorized() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authorized...)
}
