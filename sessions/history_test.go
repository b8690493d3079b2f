package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/sessions"
)

// historyJSON is msgs as JSON, with an empty read and a nil one alike.
func historyJSON(t *testing.T, msgs []sessions.Message) string {
	t.Helper()
	if len(msgs) == 0 {
		return "[]"
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Whatever happens to a session, and whichever store (process) does it, a
// store that caches history reads exactly what one that doesn't reads.
func TestHistoryCacheReadsWhatTheDatabaseHolds(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		db := open(t)
		for _, budget := range []int{sessions.DefaultHistoryCache, 6 << 10} {
			t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) {
				randomHistory(t, db, budget, uint64(budget))
			})
		}
	})
}

func randomHistory(t *testing.T, db *dbutil.DB, budget int, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	plain := sessions.NewStore(db, sessions.WithHistoryCache(0))
	// Two caching stores on one database: two replicas, or a daemon and
	// a command run beside it.
	stores := []*sessions.SQLStore{
		sessions.NewStore(db, sessions.WithHistoryCache(budget)),
		sessions.NewStore(db, sessions.WithHistoryCache(budget)),
	}
	var ids []sessions.ID
	for i := range 3 {
		s, _, err := plain.Resolve(ctx, sessions.ChatKey("telegram", fmt.Sprint("h", seed, i), "u", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	call := 0
	for op := range 600 {
		st := stores[0]
		if rng.IntN(4) == 0 {
			st = stores[1]
		}
		id := ids[rng.IntN(len(ids))]
		what := "append"
		switch n := rng.IntN(100); {
		case n < 75:
			m := sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprint("user ", op)}
			switch rng.IntN(6) {
			case 0:
				m.Parts = []sessions.Part{{Type: "image", MediaType: "image/png", URL: "file://x", Data: json.RawMessage(`{"w":1}`)}}
			case 1, 2:
				m.Role, m.Content = sessions.RoleAssistant, fmt.Sprint("assistant ", op)
				m.Usage = &sessions.Usage{Input: 3, Output: 4, CostUSD: 0.25}
			case 3:
				call++
				m.Role, m.Content = sessions.RoleAssistant, ""
				m.ToolCalls = []sessions.ToolCall{{ID: fmt.Sprint("call", call), Name: "memory_search", Arguments: json.RawMessage(`{"query":"x"}`)}}
			case 4:
				m.Role, m.Content, m.ToolCallID = sessions.RoleTool, "result", fmt.Sprint("call", call)
			}
			stored, err := st.Append(ctx, id, m)
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(2) == 0 {
				// A turn's read of its prompt, right after its append.
				turns := []int{0, 2, 3}[rng.IntN(3)]
				want, err := plain.Messages(ctx, id, sessions.MessagesOptions{Turns: turns})
				if err != nil {
					t.Fatal(err)
				}
				got, err := st.Messages(ctx, id, sessions.MessagesOptions{Turns: turns, AfterAppend: stored.ID})
				if err != nil {
					t.Fatal(err)
				}
				if g, w := historyJSON(t, got), historyJSON(t, want); g != w {
					t.Fatalf("op %d: last %d turns of %s right after an append:\n got %s\nwant %s", op, turns, id, g, w)
				}
			}
		case n < 85:
			what = "compact"
			live, err := plain.Messages(ctx, id, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(live) < 4 {
				continue
			}
			k := 1 + rng.IntN(len(live)-2)
			in := sessions.CompactInput{Through: live[k].Seq, Expect: k + 1, Summary: fmt.Sprint("summary ", op)}
			if _, err := st.Compact(ctx, id, in); err != nil {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 93:
			what = "rewind"
			live, err := plain.Messages(ctx, id, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var users []sessions.Message
			for _, m := range live {
				if m.Role == sessions.RoleUser {
					users = append(users, m)
				}
			}
			if len(users) == 0 {
				continue
			}
			to := users[rng.IntN(len(users))]
			if _, err := st.Rewind(ctx, id, to.ID); err != nil && !errors.Is(err, sessions.ErrInvalidMessage) {
				t.Fatalf("op %d: %v", op, err)
			}
		case n < 98:
			what = "unrewind"
			if _, err := st.Unrewind(ctx, id); err != nil && !errors.Is(err, sessions.ErrNothingToUnrewind) &&
				!errors.Is(err, sessions.ErrConflict) {
				t.Fatalf("op %d: %v", op, err)
			}
		default:
			what = "release" // a daemon settling after a busy spell
			st.ReleaseCaches()
		}
		for range 2 {
			reader := stores[rng.IntN(len(stores))]
			turns := []int{0, 1, 2, 3, 5}[rng.IntN(5)]
			if rng.IntN(3) > 0 {
				turns = 2 // mostly the same read, as a session's turns are
			}
			for _, rid := range ids {
				want, err := plain.Messages(ctx, rid, sessions.MessagesOptions{Turns: turns})
				if err != nil {
					t.Fatal(err)
				}
				got, err := reader.Messages(ctx, rid, sessions.MessagesOptions{Turns: turns})
				if err != nil {
					t.Fatal(err)
				}
				if g, w := historyJSON(t, got), historyJSON(t, want); g != w {
					t.Fatalf("op %d (%s), last %d turns of %s:\n got %s\nwant %s", op, what, turns, rid, g, w)
				}
			}
		}
	}
}

// A store that releases its caches (a daemon settling after a busy spell)
// keeps no history, reads the next from the database, and keeps it again
// from the read after.
func TestReleaseCachesForgetsHistories(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	st := sessions.NewStore(db)
	var ids []sessions.ID
	for i := range 3 {
		s, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", fmt.Sprint("r", i), "u", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	read := func() {
		t.Helper()
		for _, id := range ids {
			if _, err := st.Append(ctx, id, sessions.Message{Role: sessions.RoleUser, Content: "hello " + string(id)}); err != nil {
				t.Fatal(err)
			}
			msgs, err := st.Messages(ctx, id, sessions.MessagesOptions{Turns: 2})
			if err != nil {
				t.Fatal(err)
			}
			if last := msgs[len(msgs)-1].Content; last != "hello "+string(id) {
				t.Fatalf("read %q last, want the append just made", last)
			}
		}
	}
	read()
	if n := st.CachedHistories(); n != len(ids) {
		t.Fatalf("%d histories cached after the reads, want %d", n, len(ids))
	}
	st.ReleaseCaches()
	if n := st.CachedHistories(); n != 0 {
		t.Fatalf("%d histories cached after release", n)
	}
	read() // from the database: a session is kept from its second read
	if n := st.CachedHistories(); n != 0 {
		t.Fatalf("%d histories cached after one read each", n)
	}
	read()
	if n := st.CachedHistories(); n != len(ids) {
		t.Fatalf("%d histories cached after two reads each, want %d", n, len(ids))
	}
}

// Appends and reads of one session from many goroutines: every read is a
// state the database was in, and the last one is the whole conversation.
func TestHistoryCacheUnderConcurrentAppends(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := sessions.NewStore(db)
		plain := sessions.NewStore(db, sessions.WithHistoryCache(0))
		s, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "c", "u", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprint(w, "/", i)}); err != nil {
						errs <- err
						return
					}
					msgs, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{Turns: 3})
					if err != nil {
						errs <- err
						return
					}
					for j := 1; j < len(msgs); j++ {
						if msgs[j].Seq <= msgs[j-1].Seq {
							errs <- fmt.Errorf("a read out of order or with a message twice: seq %d after %d", msgs[j].Seq, msgs[j-1].Seq)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, turns := range []int{0, 3} {
			want, err := plain.Messages(ctx, s.ID, sessions.MessagesOptions{Turns: turns})
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{Turns: turns})
			if err != nil {
				t.Fatal(err)
			}
			if g, w := historyJSON(t, got), historyJSON(t, want); g != w {
				t.Fatalf("last %d turns:\n got %s\nwant %s", turns, g, w)
			}
		}
	})
}

// A read right after the store's own append is served as that append left
// the session, without reading the database, once; a read as usual sees
// what another store did since.
func TestHistoryReadAfterOwnAppend(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		st := sessions.NewStore(db)
		other := sessions.NewStore(db, sessions.WithHistoryCache(0))
		s, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "after", "u", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		var last sessions.Message
		for i := range 3 { // the second read admits the session to the cache
			if last, err = st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprint("u", i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if last, err = st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "mine"}); err != nil {
			t.Fatal(err)
		}
		// Another process appends after ours, before our read.
		if _, err := other.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "theirs"}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{AfterAppend: last.ID})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got); n != 4 || got[n-1].Content != "mine" {
			t.Fatalf("read after own append: %d messages ending %q; want 4 ending with the append, as it left the session", n, got[n-1].Content)
		}
		// Once only: the next read checks the database and sees theirs.
		for _, opts := range []sessions.MessagesOptions{{AfterAppend: last.ID}, {}} {
			got, err = st.Messages(ctx, s.ID, opts)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got); n != 5 || got[n-1].Content != "theirs" {
				t.Fatalf("read %+v: %d messages ending %q; want 5 ending with the other store's append", opts, n, got[n-1].Content)
			}
		}
		// An append of a message already stored changes nothing, and
		// the read after it is as usual.
		if _, err := st.Append(ctx, s.ID, sessions.Message{ID: last.ID, Role: sessions.RoleUser, Content: "mine"}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "theirs again"}); err != nil {
			t.Fatal(err)
		}
		got, err = st.Messages(ctx, s.ID, sessions.MessagesOptions{AfterAppend: last.ID})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got); n != 6 || got[n-1].Content != "theirs again" {
			t.Fatalf("read after a repeated append: %d messages ending %q; want 6 ending with the other store's", n, got[n-1].Content)
		}
	})
}

// A read after an append is served from the cache only for the append
// that brought the copy up to date, and only as the first read after it:
// otherwise another process's append since would be missed.
func TestHistoryReadAfterAppendOnlyForThatAppend(t *testing.T) {
	plainRead := func(st *sessions.SQLStore, id sessions.ID, _ sessions.Message) error {
		_, err := st.Messages(context.Background(), id, sessions.MessagesOptions{})
		return err
	}
	repeat := func(st *sessions.SQLStore, id sessions.ID, mine sessions.Message) error {
		// A retry of an append that had in fact committed.
		_, err := st.Append(context.Background(), id, sessions.Message{ID: mine.ID, Role: mine.Role, Content: mine.Content})
		return err
	}
	cases := []struct {
		name string
		// before runs after our append of mine and before another store
		// appends; after runs once it has.
		before, after func(st *sessions.SQLStore, id sessions.ID, mine sessions.Message) error
		named         func(mine sessions.Message) sessions.MessageID
	}{
		{"a plain read came first", plainRead, nil, func(m sessions.Message) sessions.MessageID { return m.ID }},
		{"another message is named", nil, nil, func(sessions.Message) sessions.MessageID { return "not-the-last-append" }},
		{"the append was repeated", nil, repeat, func(m sessions.Message) sessions.MessageID { return m.ID }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				ctx := context.Background()
				db := open(t)
				st := sessions.NewStore(db)
				other := sessions.NewStore(db, sessions.WithHistoryCache(0))
				s, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "only", "u", "a"), sessions.Policy{})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 2 { // the second read admits the session to the cache
					if _, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: fmt.Sprint("u", i)}); err != nil {
						t.Fatal(err)
					}
					if _, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				mine, err := st.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleUser, Content: "mine"})
				if err != nil {
					t.Fatal(err)
				}
				for _, step := range []func(st *sessions.SQLStore, id sessions.ID, mine sessions.Message) error{
					tc.before,
					func(*sessions.SQLStore, sessions.ID, sessions.Message) error {
						_, err := other.Append(ctx, s.ID, sessions.Message{Role: sessions.RoleAssistant, Content: "theirs"})
						return err
					},
					tc.after,
				} {
					if step == nil {
						continue
					}
					if err := step(st, s.ID, mine); err != nil {
						t.Fatal(err)
					}
				}
				got, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{AfterAppend: tc.named(mine)})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(got); n != 4 || got[n-1].Content != "theirs" {
					t.Fatalf("%d messages ending %q; want 4 ending with the other store's append", n, got[n-1].Content)
				}
			})
		})
	}
}

// Paging a history reads, page by page, exactly what one read returns:
// live or with the archive, with or without hidden messages, across
// compactions (summaries sharing an archived message's seq) and a rewind.
func TestPagedHistoryMatchesTheWholeRead(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		st := sessions.NewStore(open(t))
		s, _, err := st.Resolve(ctx, sessions.ChatKey("telegram", "paged", "u", "a"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		say := func(n int) {
			for i := range n {
				role := sessions.RoleUser
				if i%2 == 1 {
					role = sessions.RoleAssistant
				}
				if _, err := st.Append(ctx, s.ID, sessions.Message{Role: role, Content: fmt.Sprint("m", i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		compact := func(n int) {
			live, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Compact(ctx, s.ID, sessions.CompactInput{Through: live[n-1].Seq, Expect: n, Summary: fmt.Sprint("summary of ", n)}); err != nil {
				t.Fatal(err)
			}
		}
		say(12)
		compact(6)
		say(8)
		compact(5) // archives the first summary beside the message whose seq it took
		say(6)
		live, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var lastUser sessions.Message
		for _, m := range live[:len(live)-2] {
			if m.Role == sessions.RoleUser {
				lastUser = m
			}
		}
		if _, err := st.Rewind(ctx, s.ID, lastUser.ID); err != nil {
			t.Fatal(err)
		}
		for _, archived := range []bool{false, true} {
			for _, hidden := range []bool{false, true} {
				whole, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{Archived: archived, Hidden: hidden})
				if err != nil {
					t.Fatal(err)
				}
				if archived && hidden {
					var archivedSummaries, hiddenOnes int
					for _, m := range whole {
						if m.Archived() && m.Summary {
							archivedSummaries++
						}
						if !m.HiddenAt.IsZero() {
							hiddenOnes++
						}
					}
					if archivedSummaries != 1 || hiddenOnes == 0 {
						t.Fatalf("the history holds %d archived summaries and %d hidden messages; want 1 and some", archivedSummaries, hiddenOnes)
					}
				}
				for _, size := range []int{1, 2, 3, 7, 100} {
					var paged []sessions.Message
					var after *sessions.Position
					for range len(whole) + 2 {
						page, err := st.Messages(ctx, s.ID, sessions.MessagesOptions{Archived: archived, Hidden: hidden, Limit: size, After: after})
						if err != nil {
							t.Fatal(err)
						}
						if len(page) > size {
							t.Fatalf("a page of %d holds %d", size, len(page))
						}
						paged = append(paged, page...)
						if len(page) < size {
							break
						}
						p := sessions.PositionOf(page[len(page)-1])
						after = &p
					}
					if g, w := historyJSON(t, paged), historyJSON(t, whole); g != w {
						t.Fatalf("archived %v, hidden %v, pages of %d:\n got %s\nwant %s", archived, hidden, size, g, w)
					}
				}
			}
		}
	})
}
