package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/sessions"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type env struct {
	db       *dbutil.DB
	sessions *sessions.SQLStore
	kv       *kv.Store
}

func newEnv(t *testing.T, open dbtest.Opener, lim kv.Limits) *env {
	t.Helper()
	db := open(t)
	return &env{db: db, sessions: sessions.NewStore(db), kv: kv.NewStore(db, kv.WithLimits(lim), kv.WithClock(func() time.Time { return t0 }))}
}

func (e *env) session(t *testing.T, chat string) sessions.ID {
	t.Helper()
	s, _, err := e.sessions.Resolve(context.Background(), sessions.ChatKey("telegram", chat, "u"+chat, "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func (e *env) set(t *testing.T, id sessions.ID, key, value string) kv.Usage {
	t.Helper()
	_, u, err := e.kv.Set(context.Background(), id, key, value)
	if err != nil {
		t.Fatalf("set %q: %v", key, err)
	}
	return u
}

func TestStoreRoundTripAndIsolation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open, kv.Limits{})
		a, b := e.session(t, "1"), e.session(t, "2")
		e.set(t, a, "todo", "milk")
		u := e.set(t, a, "todo", "milk, eggs") // replaces
		if u.Keys != 1 || u.Bytes != int64(len("todo")+len("milk, eggs")) {
			t.Errorf("usage after replacing = %+v, want 1 key of %d bytes", u, len("todo")+len("milk, eggs"))
		}
		e.set(t, a, "notes/ünïcode", "ä")
		it, err := e.kv.Get(ctx, a, "todo")
		if err != nil || *it.Value != "milk, eggs" || it.Size != 14 || !it.CreatedAt.Equal(t0) || !it.UpdatedAt.Equal(t0) {
			t.Fatalf("get = %+v (value %v), %v", it, it.Value, err)
		}
		// Another session sees none of it, and has its own.
		if _, err := e.kv.Get(ctx, b, "todo"); !errors.Is(err, kv.ErrNotFound) {
			t.Errorf("session b reads a's key: %v, want ErrNotFound", err)
		}
		e.set(t, b, "todo", "bread")
		if it, _ := e.kv.Get(ctx, a, "todo"); *it.Value != "milk, eggs" {
			t.Errorf("b's set changed a's value to %q", *it.Value)
		}
		page, err := e.kv.List(ctx, a, kv.ListOptions{})
		if err != nil || len(page.Items) != 2 || page.Items[0].Key != "notes/ünïcode" || page.Items[1].Key != "todo" ||
			page.Items[0].Value != nil || page.Next != "" {
			t.Fatalf("list a = %+v, %v", page, err)
		}
		found, err := e.kv.Delete(ctx, a, "todo")
		if err != nil || !found {
			t.Fatalf("delete = %v, %v", found, err)
		}
		if found, _ := e.kv.Delete(ctx, a, "todo"); found {
			t.Error("a second delete found the key")
		}
		if u, err := e.kv.Usage(ctx, a); err != nil || u.Keys != 1 || u.Bytes != int64(len("notes/ünïcode")+len("ä")) {
			t.Errorf("usage of a = %+v, %v", u, err)
		}
		if _, _, err := e.kv.Set(ctx, "no-such-session", "k", "v"); !errors.Is(err, kv.ErrNoSession) {
			t.Errorf("set in a missing session: %v, want ErrNoSession", err)
		}
		// Deleting the session deletes its storage.
		if err := e.sessions.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		if u, err := e.kv.Usage(ctx, b); err != nil || u.Keys != 0 {
			t.Errorf("storage of a deleted session = %+v, %v; want none", u, err)
		}
	})
}

func TestStoreLimitsNameTheirKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open, kv.Limits{MaxValueBytes: 10, MaxSessionBytes: 30, MaxKeys: 3})
		id := e.session(t, "1")
		tests := []struct {
			name, key, value string
			want             error
			words            string
		}{
			{"value over its limit", "k", strings.Repeat("x", 11), kv.ErrValueTooLarge, "11 bytes and the limit per value is 10 bytes (sessions.kv.max_value_bytes)"},
			{"empty key", " ", "v", kv.ErrInvalidKey, "empty"},
			{"long key", strings.Repeat("k", kv.MaxKeyBytes+1), "v", kv.ErrInvalidKey, "257 bytes and the limit is 256"},
			{"control character", "a\nb", "v", kv.ErrInvalidKey, "control character"},
			{"NUL in value", "k", "a\x00b", kv.ErrInvalidValue, "NUL"},
			{"invalid UTF-8", "k", "\xff", kv.ErrInvalidValue, "UTF-8"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := e.kv.Set(ctx, id, tc.key, tc.value)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
					t.Fatalf("set = %v, want %v saying %q", err, tc.want, tc.words)
				}
			})
		}
		e.set(t, id, "a", "123456789") // 10 bytes
		e.set(t, id, "b", "123456789") // 20
		_, _, err := e.kv.Set(ctx, id, "c", "1234567890")
		if !errors.Is(err, kv.ErrSessionFull) || !strings.Contains(err.Error(), "31 bytes and the limit is 30 bytes (sessions.kv.max_session_bytes)") {
			t.Fatalf("set over the session's bytes = %v", err)
		}
		// Replacing a value counts the new size, not both.
		e.set(t, id, "b", "12345678")
		e.set(t, id, "c", "123456789") // 29 bytes, 3 keys
		_, _, err = e.kv.Set(ctx, id, "d", "")
		if !errors.Is(err, kv.ErrSessionFull) || !strings.Contains(err.Error(), "3 keys and the limit is 3 (sessions.kv.max_keys)") {
			t.Fatalf("set over the session's keys = %v", err)
		}
		if u, _ := e.kv.Usage(ctx, id); u.Keys != 3 || u.Bytes != 29 {
			t.Errorf("refused sets changed the storage: %+v", u)
		}
	})
}

// Sets running at once in one session never take it over its limit: each
// counts what the others committed.
func TestStoreLimitHoldsUnderConcurrentSets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open, kv.Limits{MaxValueBytes: 100, MaxSessionBytes: 100, MaxKeys: 100})
		id := e.session(t, "1")
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 20 {
			wg.Go(func() {
				_, _, err := e.kv.Set(ctx, id, fmt.Sprintf("k%02d", i), strings.Repeat("v", 17)) // 20 bytes each
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		stored := 0
		for err := range errs {
			switch {
			case err == nil:
				stored++
			case !errors.Is(err, kv.ErrSessionFull):
				t.Errorf("set: %v", err)
			}
		}
		u, err := e.kv.Usage(ctx, id)
		if err != nil || stored != 5 || u.Keys != 5 || u.Bytes != 100 {
			t.Fatalf("%d sets stored, usage %+v (%v); want exactly 5 keys of 100 bytes", stored, u, err)
		}
	})
}

func TestStoreListPagesAndPrefix(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		e := newEnv(t, open, kv.Limits{})
		id := e.session(t, "1")
		// Byte order on both engines: upper case before lower, "é" after "z".
		for _, k := range []string{"b", "a/2", "a/1", "B", "é", "z", "a%", "a_"} {
			e.set(t, id, k, "v-"+k)
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, err := e.kv.List(ctx, id, kv.ListOptions{Limit: 3, Cursor: cursor, Values: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				if it.Value == nil || *it.Value != "v-"+it.Key {
					t.Errorf("item %q has value %v", it.Key, it.Value)
				}
				got = append(got, it.Key)
			}
			if page.Next == "" {
				break
			}
			if pages > 5 {
				t.Fatal("listing does not end")
			}
			cursor = page.Next
		}
		if want := "B a% a/1 a/2 a_ b z é"; strings.Join(got, " ") != want {
			t.Errorf("keys = %q, want %q", strings.Join(got, " "), want)
		}
		// LIKE's wildcards are ordinary characters in a prefix.
		for prefix, want := range map[string]string{"a/": "a/1 a/2", "a%": "a%", "a_": "a_", "é": "é", "zz": ""} {
			page, err := e.kv.List(ctx, id, kv.ListOptions{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, it := range page.Items {
				keys = append(keys, it.Key)
			}
			if strings.Join(keys, " ") != want {
				t.Errorf("prefix %q: %q, want %q", prefix, strings.Join(keys, " "), want)
			}
		}
		if _, err := e.kv.List(ctx, id, kv.ListOptions{Cursor: "!!"}); !errors.Is(err, kv.ErrBadCursor) {
			t.Errorf("bad cursor: %v", err)
		}
	})
}
