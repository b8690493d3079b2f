package webhooks

import (
	"slices"
	"time"
)

// keptRefusals is how many refused requests a Server remembers, for the
// dashboard; the log and the metric have them all.
const keptRefusals = 200

// Refusal is a request refused before it became a delivery: a bad
// signature, a replay, an unknown hook.
type Refusal struct {
	At     time.Time
	Hook   string
	Status int
	Reason string // the error code the sender got
	Remote string
}

func (s *Server) keepRefusal(r Refusal) {
	s.refusalsMu.Lock()
	defer s.refusalsMu.Unlock()
	if len(s.refusals) >= keptRefusals {
		s.refusals = append(s.refusals[:0], s.refusals[1:]...)
	}
	s.refusals = append(s.refusals, r)
}

// Refusals are the latest refused requests (at most 200), newest first.
func (s *Server) Refusals() []Refusal {
	s.refusalsMu.Lock()
	defer s.refusalsMu.Unlock()
	out := slices.Clone(s.refusals)
	slices.Reverse(out)
	return out
}
