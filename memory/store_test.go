package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

func TestWriteAndRead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db, c := open(t), newClock()
		s := builtinStore(t, db, c)
		it, err := s.Write(ctx, alice, Memory{Content: "  Alice's birthday is March 3  ", Tags: []string{"dates", " family ", "dates"},
			SessionID: "sess-1", MessageID: "msg-1"})
		if err != nil {
			t.Fatal(err)
		}
		if it.Content != "Alice's birthday is March 3" || !slices.Equal(it.Tags, []string{"dates", "family"}) || it.Kind != KindMemory {
			t.Fatalf("written item = %+v", it)
		}
		got, err := s.Item(ctx, alice, it.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != it.ID || got.Content != it.Content || !slices.Equal(got.Tags, it.Tags) || got.Scope != alice ||
			got.SessionID != "sess-1" || got.MessageID != "msg-1" || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
			t.Fatalf("read back %+v, wrote %+v", got, it)
		}
		if _, err := s.Item(ctx, bob, it.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob reading alice's item: %v, want ErrNotFound", err)
		}
		// The built-in index needs no queue.
		if n := count(t, db, "memory_index_queue"); n != 0 {
			t.Fatalf("%d queue rows with the built-in index", n)
		}
	})
}

func TestInvalidMemoriesAreRefusedAndChangeNothing(t *testing.T) {
	tooManyTags := make([]string, MaxTags+1)
	for i := range tooManyTags {
		tooManyTags[i] = string(rune('a' + i))
	}
	cases := []struct {
		name string
		m    Memory
		want string
	}{
		{"empty", Memory{Content: ""}, "content is empty"},
		{"blank", Memory{Content: " \n\t "}, "content is empty"},
		{"too long", Memory{Content: strings.Repeat("é", MaxContentRunes+1)}, "8001 characters and the limit is 8000"},
		{"NUL", Memory{Content: "a\x00b"}, "NUL"},
		{"invalid UTF-8", Memory{Content: "a\xffb"}, "UTF-8"},
		{"too many tags", Memory{Content: "x", Tags: tooManyTags}, "11 tags given and the limit is 10"},
		{"long tag", Memory{Content: "x", Tags: []string{strings.Repeat("t", MaxTagRunes+1)}}, "tag 1 is 65 characters"},
		{"empty tag", Memory{Content: "x", Tags: []string{"ok", " "}}, "tag 2 is empty"},
		{"control in tag", Memory{Content: "x", Tags: []string{"a\nb"}}, "control characters"},
	}
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		s := builtinStore(t, db, newClock())
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.Write(context.Background(), alice, tc.m)
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Write = %v, want ErrInvalid saying %q", err, tc.want)
				}
				if n := count(t, db, "memory_items"); n != 0 {
					t.Fatalf("%d items stored after a refused write", n)
				}
			})
		}
		if _, err := s.Write(context.Background(), Scope{Agent: "a"}, Memory{Content: "x"}); !errors.Is(err, ErrInvalidScope) {
			t.Fatalf("Write without a user = %v", err)
		}
		// At the limits (counted in characters, not bytes) is fine.
		tags := make([]string, MaxTags)
		for i := range tags {
			tags[i] = strings.Repeat(string(rune('a'+i)), MaxTagRunes)
		}
		if _, err := s.Write(context.Background(), alice, Memory{Content: strings.Repeat("é", MaxContentRunes), Tags: tags}); err != nil {
			t.Fatalf("a memory at the limits: %v", err)
		}
	})
}

// No query reaches another scope: not through the store, not through the
// index itself, and not by a query that names the other scope's key.
func TestScopeIsolationBuiltin(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := builtinStore(t, db, newClock())
		mustWrite(t, s, alice, "Alice keeps her spare key under the blue flowerpot", "secrets")
		others := map[string]Scope{
			"another user":      bob,
			"another agent":     {Agent: "other", User: alice.User},
			"another workspace": {Agent: alice.Agent, User: alice.User, Workspace: "w2"},
			"a group":           ScopeOf(sessions.GroupKey("telegram", "100", "default")),
		}
		for _, q := range []string{"spare key flowerpot", "secrets", "alice", alice.key(), "scope_key : " + alice.key()} {
			if got := mustSearch(t, s, alice, "flowerpot", 5); len(got) != 1 {
				t.Fatalf("alice finds %d of her own memories", len(got))
			}
			for name, other := range others {
				if got := mustSearch(t, s, other, q, 20); len(got) != 0 {
					t.Errorf("%s found alice's memory with %q: %v", name, q, contents(got))
				}
				hits, err := s.Index().Search(ctx, other, q, 20)
				if err != nil || len(hits) != 0 {
					t.Errorf("%s: the index itself returned %v (%v) for %q", name, hits, err, q)
				}
			}
		}
	})
}

func TestHostileQueriesDoNotError(t *testing.T) {
	queries := []string{
		`"unbalanced tea`, `-tea`, `tea*`, `*`, `content:tea`, `tags:tea`, `scope_key:tea`, `{content}: tea`,
		`(tea OR`, `tea)`, `NEAR(tea coffee)`, `NEAR/2`, `tea AND`, `OR tea`, `NOT`, `AND OR NOT NEAR`,
		`^tea`, `tea:`, `:`, `'; DROP TABLE memory_items; --`, `tea\x00`, "tea \xff\xfe", `"`, `""`, `'`,
		`\`, `%`, `_`, `tea & coffee | !milk`, `tea <-> coffee`, `tea:*`, `!!`, `()`, `[tea]`, `tea~2`, `+tea`,
		`alice@example.com`, `example.com/path`, `2026-03-01`, `3e5`, strings.Repeat("(tea ", 500),
		strings.Repeat("x", 20000), "💥 tea 💥", "ทดสอบ tea",
	}
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		s := builtinStore(t, open(t), newClock())
		mustWrite(t, s, alice, "Green tea with a little honey, every morning at 7")
		for _, q := range queries {
			got, err := s.Search(context.Background(), alice, q, 5)
			if err != nil {
				t.Errorf("Search(%.40q) = %v", q, err)
				continue
			}
			wantHit := slices.Contains(parseQuery(q).terms, "tea")
			if wantHit != (len(got) == 1) {
				t.Errorf("Search(%.40q) found %d, want the memory: %v", q, len(got), wantHit)
			}
		}
	})
}

func TestRanking(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db, c := open(t), newClock()
		s := builtinStore(t, db, c)
		mustWrite(t, s, alice, "Bob drinks tea after lunch, usually black")
		c.Advance(time.Minute)
		mustWrite(t, s, alice, "Alice's favourite drink is green tea")
		c.Advance(time.Minute)
		mustWrite(t, s, alice, "The garden is green in spring")
		got := contents(mustSearch(t, s, alice, "green tea", 5))
		if len(got) != 3 || got[0] != "Alice's favourite drink is green tea" {
			t.Fatalf("green tea: %q, want the memory with both words first", got)
		}

		// Equal matches: newest first, by when they were made, not by
		// insertion order.
		c.Advance(time.Hour)
		newer := mustWrite(t, s, alice, "parking spot number 12")
		c.Advance(-30 * time.Minute)
		older := mustWrite(t, s, alice, "parking spot number 12")
		res := mustSearch(t, s, alice, "parking", 5)
		if len(res) != 2 || res[0].ID != newer.ID || res[1].ID != older.ID {
			t.Fatalf("equal matches came back as %v, want %s (newer) then %s", res, newer.ID, older.ID)
		}
		if res[0].Score != res[1].Score {
			t.Fatalf("identical memories scored %v and %v", res[0].Score, res[1].Score)
		}
		if lim := mustSearch(t, s, alice, "green tea", 1); len(lim) != 1 {
			t.Fatalf("limit 1 returned %d", len(lim))
		}
	})
}

func TestSearchLimitIsClamped(t *testing.T) {
	s := builtinStore(t, dbtest.SQLite(t), newClock())
	for range MaxSearchLimit + 5 {
		mustWrite(t, s, alice, "tea")
	}
	if n := len(mustSearch(t, s, alice, "tea", 0)); n != DefaultSearchLimit {
		t.Fatalf("limit 0 gave %d, want the default %d", n, DefaultSearchLimit)
	}
	if n := len(mustSearch(t, s, alice, "tea", 1000)); n != MaxSearchLimit {
		t.Fatalf("limit 1000 gave %d, want at most %d", n, MaxSearchLimit)
	}
}

func TestSummaries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db, c := open(t), newClock()
		s := builtinStore(t, db, c)
		sum := Summary{SessionID: "sess-9", MessageID: "msg-summary-1", Content: "Goal: plan the Lisbon trip. Decisions: fly on Friday."}
		first, err := s.IndexSummary(ctx, alice, sum)
		if err != nil {
			t.Fatal(err)
		}
		if first.Kind != KindSummary || first.SessionID != "sess-9" || first.MessageID != "msg-summary-1" {
			t.Fatalf("summary item = %+v", first)
		}
		res := mustSearch(t, s, alice, "lisbon", 5)
		if len(res) != 1 || res[0].Kind != KindSummary {
			t.Fatalf("search for the summary: %+v", res)
		}

		// Indexing it again (a retry) updates the one item.
		c.Advance(time.Minute)
		sum.Content = "Goal: plan the Porto trip."
		again, err := s.IndexSummary(ctx, alice, sum)
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID || !again.UpdatedAt.After(first.UpdatedAt) || !again.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("re-indexed summary %+v, first %+v", again, first)
		}
		if n := count(t, db, "memory_items"); n != 1 {
			t.Fatalf("%d items after indexing one summary twice", n)
		}
		if got := mustSearch(t, s, alice, "lisbon", 5); len(got) != 0 {
			t.Fatalf("the old summary text is still found: %v", contents(got))
		}
		if got := mustSearch(t, s, alice, "porto", 5); len(got) != 1 {
			t.Fatalf("the new summary text is not found")
		}

		// The same summary message can't be claimed by another scope.
		if _, err := s.IndexSummary(ctx, bob, sum); !errors.Is(err, ErrInvalid) {
			t.Fatalf("bob indexing alice's summary message: %v", err)
		}
		if got, _ := s.Item(ctx, alice, first.ID); got.Content != sum.Content {
			t.Fatalf("alice's summary changed to %q", got.Content)
		}
		if _, err := s.IndexSummary(ctx, alice, Summary{SessionID: "s", Content: "x"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("summary without a message id: %v", err)
		}
	})
}

func TestSummaryJoinsTheCallersTransaction(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s := builtinStore(t, db, newClock())
		boom := errors.New("compaction failed")
		err := db.Tx(ctx, func(q dbutil.Querier) error {
			if _, err := s.SummaryTx(ctx, q, alice, Summary{SessionID: "s", MessageID: "m", Content: "rolled back"}); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if n := count(t, db, "memory_items"); n != 0 {
			t.Fatalf("a rolled-back summary left %d items", n)
		}
	})
}

func TestDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		s := builtinStore(t, open(t), newClock())
		it := mustWrite(t, s, alice, "the wifi password is on the fridge")
		if err := s.Delete(ctx, bob, it.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob deleting alice's memory: %v", err)
		}
		if err := s.Delete(ctx, alice, it.ID); err != nil {
			t.Fatal(err)
		}
		if got := mustSearch(t, s, alice, "wifi", 5); len(got) != 0 {
			t.Fatalf("a deleted memory is still found")
		}
		if err := s.Delete(ctx, alice, it.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting twice: %v", err)
		}
	})
}

// Items stored before the built-in index existed (say, under Typesense) are
// searchable once it is created; Reindex rebuilds it in place.
func TestBuiltinFillsFromExistingItemsAndReindexes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db, c := open(t), newClock()
		before := NewStore(db, nopIndex{}, WithClock(c.Now))
		mustWrite(t, before, alice, "the boat is called Marigold")
		mustWrite(t, before, bob, "the bike is red")

		s := builtinStore(t, db, c)
		if got := mustSearch(t, s, alice, "marigold", 5); len(got) != 1 {
			t.Fatalf("an item stored before the index existed is not found")
		}
		n, err := s.Reindex(ctx)
		if err != nil || n != 2 {
			t.Fatalf("Reindex = %d, %v; want 2", n, err)
		}
		if got := mustSearch(t, s, bob, "bike", 5); len(got) != 1 {
			t.Fatalf("not found after Reindex")
		}
		// Opening the index again is harmless.
		if _, err := NewBuiltin(ctx, db); err != nil {
			t.Fatal(err)
		}
		if got := mustSearch(t, s, alice, "marigold", 5); len(got) != 1 {
			t.Fatalf("found %d after reopening the index", len(got))
		}
	})
}

// The SQLite triggers keep the FTS5 table exactly in step with the items
// through inserts, updates and deletes.
func TestSQLiteFTSStaysConsistent(t *testing.T) {
	ctx := context.Background()
	db, c := dbtest.SQLite(t), newClock()
	s := builtinStore(t, db, c)
	for i := range 20 {
		mustWrite(t, s, alice, "note number "+strings.Repeat("x", i))
	}
	it := mustWrite(t, s, bob, "to be deleted")
	for i := range 3 {
		if _, err := s.IndexSummary(ctx, alice, Summary{SessionID: "s", MessageID: "m", Content: "summary version " + strings.Repeat("v", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, bob, it.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Writer().ExecContext(ctx, `INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Fatalf("FTS5 integrity check: %v", err)
	}
}

// nopIndex is an external index that accepts everything and finds nothing.
type nopIndex struct{}

func (nopIndex) Name() string                                              { return "nop" }
func (nopIndex) Upsert(context.Context, Doc) error                         { return nil }
func (nopIndex) Delete(context.Context, ItemID) error                      { return nil }
func (nopIndex) Search(context.Context, Scope, string, int) ([]Hit, error) { return nil, nil }

// Opening the SQLite index again writes nothing once it is complete, and
// completes one that lacks a part (here a trigger, as an interrupted
// first start could leave it): a write then still reaches the index.
func TestSQLiteBuiltinOpensWithoutWritingAndCompletesAPartialIndex(t *testing.T) {
	ctx := context.Background()
	db, c := dbtest.SQLite(t), newClock()
	s := builtinStore(t, db, c)
	writes := db.Transactions()
	if _, err := NewBuiltin(ctx, db); err != nil {
		t.Fatal(err)
	}
	if n := db.Transactions() - writes; n != 0 {
		t.Fatalf("reopening a complete index made %d write transactions; want 0", n)
	}
	if _, err := db.Writer().ExecContext(ctx, `DROP TRIGGER memory_items_fts_insert`); err != nil {
		t.Fatal(err)
	}
	if _, err := NewBuiltin(ctx, db); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, alice, "the kite is yellow")
	if got := mustSearch(t, s, alice, "kite", 5); len(got) != 1 {
		t.Fatalf("found %d items after the index was completed; want 1", len(got))
	}
}
