package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// events streams a session's run events as Server-Sent Events: the current
// run from its first event, then live. Each event is written as
// "id: <run_id>:<index>", "event: <type>" and "data: <envelope JSON>".
// Query run_id replays that run even when finished; the Last-Event-ID
// header resumes after an event of the latest run. Disconnecting does not
// abort the run.
func (s *server) events(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Events == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "event streams are not available on this server")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	f, err := parseFilter(r, true)
	if err != nil {
		return err
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return errors.New("response writer cannot stream")
	}
	opts := SubscribeOptions{
		RunID:       r.URL.Query().Get("run_id"),
		LastEventID: firstNonEmpty(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id")),
	}
	// A run the log let go of is rebuilt from the database; the stream
	// then follows the session's runs from the one in progress.
	var replay []Event
	if opts.RunID != "" && !s.opts.Events.Held(string(sess.ID), opts.RunID) {
		evs, found, err := s.opts.Events.Replay(r.Context(), s.opts.Store, string(sess.ID), opts.RunID)
		if err != nil {
			return err
		}
		if found {
			replay, opts = evs, SubscribeOptions{}
		}
	}
	stream := s.opts.Events.Subscribe(string(sess.ID), opts)
	defer stream.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(": stream " + string(sess.ID) + "\nretry: 2000\n\n")); err != nil {
		return nil
	}
	flusher.Flush()
	if replay = f.keepEvents(replay); len(replay) > 0 {
		buf := make([]byte, 0, 1024)
		for _, e := range replay {
			buf = appendSSE(buf, e)
		}
		if _, err := w.Write(buf); err != nil {
			return nil
		}
		flusher.Flush()
	}

	ctx := r.Context()
	batches := make(chan []Event)
	go func() {
		defer close(batches)
		for {
			b, err := stream.Next(ctx)
			if err != nil {
				return
			}
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	buf := make([]byte, 0, 1024)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return nil
			}
			flusher.Flush()
		case b, ok := <-batches:
			if !ok {
				return nil
			}
			if b = f.keepEvents(b); len(b) == 0 {
				continue
			}
			buf = buf[:0]
			for _, e := range b {
				buf = appendSSE(buf, e)
			}
			if _, err := w.Write(buf); err != nil {
				return nil
			}
			flusher.Flush()
		}
	}
}

func appendSSE(buf []byte, e Event) []byte {
	data, err := json.Marshal(e)
	if err != nil {
		return buf
	}
	buf = append(buf, "id: "...)
	buf = append(buf, e.ID...)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, e.Type...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}
