package kv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// Through the tools, each session keeps its own keys, within the limits.
func TestSessionStorage(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		ctx := context.Background()
		st := sessions.NewStore(db)
		a, _, err := st.Resolve(ctx, sessions.CLIKey("u1", "a1"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := st.Resolve(ctx, sessions.CLIKey("u2", "a1"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		reg := tools.NewRegistry()
		for _, tool := range kv.Tools(kv.New(db)) {
			if err := reg.Register(tool); err != nil {
				t.Fatal(err)
			}
		}
		call := func(s sessions.Session, name, args string) tools.Result {
			return reg.Call(ctx, tools.Call{Name: name, SessionID: s.ID, Key: s.Key, Arguments: json.RawMessage(args)})
		}
		if r := call(a, "kv_set", `{"key":"todo","value":"buy milk"}`); r.IsError {
			t.Fatal(r.Content)
		}
		if r := call(a, "kv_get", `{"key":"todo"}`); r.IsError || r.Content != "buy milk" {
			t.Fatalf("get: %+v", r)
		}
		if r := call(b, "kv_get", `{"key":"todo"}`); !r.IsError || !strings.Contains(r.Content, "nothing is stored") {
			t.Fatalf("another session read it: %+v", r)
		}
		if r := call(a, "kv_set", `{"key":"todo","value":"buy bread"}`); r.IsError {
			t.Fatal(r.Content)
		}
		if r := call(a, "kv_list", `{}`); r.IsError || r.Content != "todo (9 bytes)" {
			t.Fatalf("list: %+v", r)
		}
		if r := call(a, "kv_set", `{"key":"big","value":"`+strings.Repeat("x", kv.MaxValueBytes+1)+`"}`); !r.IsError || !strings.Contains(r.Content, "at most 16384") {
			t.Fatalf("a value past the limit: %+v", r)
		}
		store := kv.New(db)
		for i := 1; i < kv.MaxKeys; i++ {
			if err := store.Set(ctx, a.ID, fmt.Sprintf("k%03d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Set(ctx, a.ID, "one-too-many", "v"); !errors.Is(err, kv.ErrLimit) {
			t.Fatalf("key %d: %v", kv.MaxKeys+1, err)
		}
		if err := store.Set(ctx, a.ID, "todo", "replace is fine"); err != nil {
			t.Fatalf("replacing at the limit: %v", err)
		}
		if r := call(a, "kv_delete", `{"key":"todo"}`); r.IsError || r.Content != "deleted todo" {
			t.Fatalf("delete: %+v", r)
		}
		if _, err := store.Get(ctx, a.ID, "todo"); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if es, err := store.List(ctx, a.ID, "k00"); err != nil || len(es) != 9 {
			t.Fatalf("list by prefix: %d %v", len(es), err)
		}
	})
}
