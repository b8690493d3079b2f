package main

import (
	"io"
	"sync"
)

// syncWriter lets a test read what a goroutine writes.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String is what was written, when w is a *bytes.Buffer.
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.w.(interface{ String() string }); ok {
		return b.String()
	}
	return ""
}
