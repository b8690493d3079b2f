package api

import (
	"errors"
	"net/http"

	"github.com/parleyd/parley/kv"
)

// KVPage answers GET /v1/sessions/{id}/kv: a page of the session's storage
// in byte order of the keys, and what it stores in all against its limits.
type KVPage struct {
	Items []kv.Item `json:"items"`
	Next  string    `json:"next_cursor,omitempty"`
	Usage kv.Usage  `json:"usage"`
}

// kvStore is the session storage the routes read, or a 503.
func (s *server) kvStore() (*kv.Store, error) {
	if s.opts.KV == nil {
		return nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "session storage is not available on this server")
	}
	return s.opts.KV, nil
}

// listKV is GET /v1/sessions/{id}/kv?prefix=&cursor=&limit=&values=: the
// session's keys with their sizes (and values with values=true).
func (s *server) listKV(store *kv.Store, w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", DefaultPageSize, 1, kv.MaxListLimit)
	if err != nil {
		return err
	}
	values, err := queryBool(r, "values")
	if err != nil {
		return err
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := store.List(r.Context(), sess.ID, kv.ListOptions{Prefix: q.Get("prefix"), Cursor: q.Get("cursor"), Limit: limit, Values: values})
	if err != nil {
		return kvError(err)
	}
	usage, err := store.Usage(r.Context(), sess.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KVPage{Items: page.Items, Next: page.Next, Usage: usage})
	return nil
}

// getKV is GET /v1/sessions/{id}/kv/{key}: one value. A key may hold "/"
// (the rest of the path is the key); escape other reserved characters.
func (s *server) getKV(store *kv.Store, w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := kv.CheckKey(key); err != nil {
		return badRequest(err.Error())
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	it, err := store.Get(r.Context(), sess.ID, key)
	if errors.Is(err, kv.ErrNotFound) {
		return errorf(http.StatusNotFound, CodeNotFound, "session "+string(sess.ID)+" stores nothing under the key "+quote(key))
	}
	if err != nil {
		return kvError(err)
	}
	writeJSON(w, http.StatusOK, it)
	return nil
}

// kvError maps the storage's refusals: bad input is 400.
func kvError(err error) error {
	if errors.Is(err, kv.ErrInvalidKey) || errors.Is(err, kv.ErrBadCursor) {
		return badRequest(err.Error())
	}
	return err
}
