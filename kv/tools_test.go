package kv_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/kv"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

func registry(t *testing.T, store *kv.Store) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	for _, tool := range kv.Tools(store) {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func TestToolsWorkInTheCallingSession(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		e := newEnv(t, open, kv.Limits{MaxValueBytes: 20, MaxSessionBytes: 40, MaxKeys: 10})
		reg := registry(t, e.kv)
		a, b := e.session(t, "1"), e.session(t, "2")
		call := func(id sessions.ID, name, args string) tools.Result {
			return reg.Call(context.Background(), tools.Call{Name: name, SessionID: id, ID: "c", Arguments: json.RawMessage(args)})
		}
		steps := []struct {
			session   sessions.ID
			tool      string
			args      string
			wantError bool
			want      string
		}{
			{a, kv.SetToolName, `{"key": "todo", "value": "milk"}`, false, `Stored "todo" (4 bytes). This conversation's storage holds 1 of 10 keys and 8 of 40 bytes.`},
			{a, kv.GetToolName, `{"key": "todo"}`, false, "milk"},
			{b, kv.GetToolName, `{"key": "todo"}`, true, `error: kv_get: this conversation's storage has no key "todo"; kv_list shows the keys it has`},
			{b, kv.ListToolName, `{}`, false, "No keys in this conversation's storage.\n\nIn all: 0 of 10 keys, 0 of 40 bytes."},
			{a, kv.SetToolName, `{"key": "big", "value": "` + strings.Repeat("x", 21) + `"}`, true, "the limit per value is 20 bytes (sessions.kv.max_value_bytes)"},
			{a, kv.SetToolName, `{"key": "notes/1", "value": "` + strings.Repeat("x", 20) + `"}`, false, "holds 2 of 10 keys and 35 of 40 bytes"},
			{a, kv.SetToolName, `{"key": "notes/2", "value": "` + strings.Repeat("x", 20) + `"}`, true, "the limit is 40 bytes (sessions.kv.max_session_bytes)"},
			{a, kv.ListToolName, `{"prefix": "notes/"}`, false, "Keys starting with \"notes/\" in this conversation's storage:\n\n- notes/1 (27 bytes, updated 2026-03-01 09:00 UTC)\n\nIn all: 2 of 10 keys, 35 of 40 bytes."},
			{a, kv.DeleteToolName, `{"key": "todo"}`, false, `Deleted "todo".`},
			{a, kv.DeleteToolName, `{"key": "todo"}`, false, `There was no key "todo"; nothing was deleted.`},
			{a, kv.GetToolName, `{"key": ""}`, true, "error: invalid arguments"},
			{a, kv.SetToolName, `{"key": "k"}`, true, "error: invalid arguments"},
			{a, kv.SetToolName, `{"key": "k", "value": "v", "session": "other"}`, true, "error: invalid arguments"},
		}
		for i, s := range steps {
			res := call(s.session, s.tool, s.args)
			if res.IsError != s.wantError || !strings.Contains(res.Content, s.want) {
				t.Fatalf("step %d %s(%s) = %q (error %v); want error %v containing %q", i, s.tool, s.args, res.Content, res.IsError, s.wantError, s.want)
			}
		}
	})
}

func TestListToolPages(t *testing.T) {
	e := newEnv(t, dbtest.SQLite, kv.Limits{MaxKeys: 300})
	reg := registry(t, e.kv)
	id := e.session(t, "1")
	for i := range 201 {
		e.set(t, id, strings.Repeat("k", 1+i/26)+string(rune('a'+i%26)), "v")
	}
	res := reg.Call(context.Background(), tools.Call{Name: kv.ListToolName, SessionID: id, Arguments: json.RawMessage(`{}`)})
	_, after, ok := strings.Cut(res.Content, `call kv_list with {"cursor": "`)
	if res.IsError || !ok || strings.Count(res.Content, "\n- ") != 200 {
		t.Fatalf("first page: %d items, %q", strings.Count(res.Content, "\n- "), res.Content[len(res.Content)-200:])
	}
	cursor, _, _ := strings.Cut(after, `"`)
	res = reg.Call(context.Background(), tools.Call{Name: kv.ListToolName, SessionID: id, Arguments: json.RawMessage(`{"cursor": "` + cursor + `"}`)})
	if res.IsError || strings.Count(res.Content, "\n- ") != 1 || strings.Contains(res.Content, "More keys follow") || !strings.Contains(res.Content, "201 of 300 keys") {
		t.Fatalf("second page: %q", res.Content)
	}
}
