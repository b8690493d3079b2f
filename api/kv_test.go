package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/sessions"
)

func newKVEnv(t *testing.T, open dbtest.Opener) (*env, *kv.Store) {
	t.Helper()
	db := open(t)
	st := sessions.NewStore(db)
	store := kv.NewStore(db, kv.WithLimits(kv.Limits{MaxKeys: 50}), kv.WithClock(func() time.Time { return time.UnixMilli(1700000000000) }))
	srv := newAPIServer(t, api.New(api.Options{Store: st, KV: store, Tokens: []string{token}, DefaultAgent: "main", Heartbeat: time.Hour}))
	t.Cleanup(srv.Close)
	return &env{srv: srv, store: st}, store
}

func TestSessionStorageIsReadable(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e, store := newKVEnv(t, open)
		a, b := e.createSession(t, `{}`), e.createSession(t, `{}`)
		ctx := context.Background()
		for key, value := range map[string]string{"todo": "milk", "notes/berlin": "rain", "notes/paris": "sun", "a b?": "odd"} {
			if _, _, err := store.Set(ctx, a.ID, key, value); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := store.Set(ctx, b.ID, "todo", "b's own"); err != nil {
			t.Fatal(err)
		}

		r := e.do(t, "GET", "/v1/sessions/"+string(a.ID)+"/kv?limit=2", "")
		var page api.KVPage
		r.decode(t, &page)
		if r.status != http.StatusOK || len(page.Items) != 2 || page.Items[0].Key != "a b?" || page.Items[1].Key != "notes/berlin" ||
			page.Items[0].Value != nil || page.Next == "" || page.Usage.Keys != 4 || page.Usage.Limits.MaxKeys != 50 {
			t.Fatalf("first page: %d %s", r.status, r.body)
		}
		r = e.do(t, "GET", "/v1/sessions/"+string(a.ID)+"/kv?values=true&cursor="+url.QueryEscape(page.Next), "")
		page = api.KVPage{}
		r.decode(t, &page)
		if r.status != http.StatusOK || len(page.Items) != 2 || page.Items[0].Key != "notes/paris" || *page.Items[0].Value != "sun" ||
			page.Items[1].Key != "todo" || page.Next != "" {
			t.Fatalf("second page: %d %s", r.status, r.body)
		}
		r = e.do(t, "GET", "/v1/sessions/"+string(a.ID)+"/kv?prefix=notes/", "")
		page = api.KVPage{}
		r.decode(t, &page)
		if len(page.Items) != 2 || page.Items[0].Key != "notes/berlin" {
			t.Fatalf("prefix: %s", r.body)
		}

		gets := []struct {
			name, path string
			status     int
			code       string
			value      string
		}{
			{"a key", "/v1/sessions/" + string(a.ID) + "/kv/todo", 200, "", "milk"},
			{"a key with a slash", "/v1/sessions/" + string(a.ID) + "/kv/notes/berlin", 200, "", "rain"},
			{"an escaped key", "/v1/sessions/" + string(a.ID) + "/kv/a%20b%3F", 200, "", "odd"},
			{"the other session's", "/v1/sessions/" + string(b.ID) + "/kv/todo", 200, "", "b's own"},
			{"a missing key", "/v1/sessions/" + string(b.ID) + "/kv/notes/berlin", 404, api.CodeNotFound, ""},
			{"a missing session", "/v1/sessions/nope/kv/todo", 404, api.CodeNotFound, ""},
			{"a missing session's list", "/v1/sessions/nope/kv", 404, api.CodeNotFound, ""},
			{"a key too long", "/v1/sessions/" + string(a.ID) + "/kv/" + strings.Repeat("k", 300), 400, api.CodeBadRequest, ""},
			{"a bad cursor", "/v1/sessions/" + string(a.ID) + "/kv?cursor=!!", 400, api.CodeBadRequest, ""},
			{"a bad limit", "/v1/sessions/" + string(a.ID) + "/kv?limit=0", 400, api.CodeBadRequest, ""},
		}
		for _, tc := range gets {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, "GET", tc.path, "")
				if r.status != tc.status {
					t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
				}
				if tc.code != "" {
					if got := r.errorCode(t); got != tc.code {
						t.Fatalf("code %q, want %q", got, tc.code)
					}
					return
				}
				var it kv.Item
				r.decode(t, &it)
				if it.Value == nil || *it.Value != tc.value || it.Size != int64(len(it.Key)+len(tc.value)) || it.UpdatedAt.UnixMilli() != 1700000000000 {
					t.Fatalf("item %s", r.body)
				}
			})
		}
		if r := e.doAuth(t, "GET", "/v1/sessions/"+string(a.ID)+"/kv/todo", "", ""); r.status != http.StatusUnauthorized {
			t.Errorf("without a token: %d", r.status)
		}
	})
}

func TestSessionStorageUnavailable(t *testing.T) {
	e := newEnv(t, dbtest.SQLite)
	s := e.createSession(t, `{}`)
	r := e.do(t, "GET", "/v1/sessions/"+string(s.ID)+"/kv", "")
	if r.status != http.StatusServiceUnavailable || r.errorCode(t) != api.CodeUnavailable {
		t.Fatalf("without storage: %d %s", r.status, r.body)
	}
}
