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
			if _, err := st.Append(ctx, id, m); err != nil {
				t.Fatal(err)
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
		default:
			what = "unrewind"
			if _, err := st.Unrewind(ctx, id); err != nil && !errors.Is(err, sessions.ErrNothingToUnrewind) &&
				!errors.Is(err, sessions.ErrConflict) {
				t.Fatalf("op %d: %v", op, err)
			}
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
