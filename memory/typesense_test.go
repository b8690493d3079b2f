package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
)

const testAPIKey = "ts-admin-Secr3tKey-do-not-leak"

// typesenseStore is a store on db whose index is Typesense behind the fake,
// and an Indexer for it on the same clock.
func typesenseStore(t testing.TB, db *dbutil.DB, c *clock) (*Store, *Indexer, *fakeTypesense, *Typesense) {
	t.Helper()
	fake, srv := newFakeTypesense(t, testAPIKey)
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(db, idx, WithClock(c.Now))
	return s, NewIndexer(s), fake, idx
}

func flush(t testing.TB, x *Indexer, want int) {
	t.Helper()
	n, err := x.Flush(context.Background())
	if err != nil || n != want {
		t.Fatalf("Flush = %d, %v; want %d pushed", n, err, want)
	}
}

func TestTypesenseWireContract(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s, x, fake, _ := typesenseStore(t, dbtest.SQLite(t), c)
	tea := mustWrite(t, s, alice, "Alice drinks green tea", "drinks")
	c.Advance(time.Minute)
	mustWrite(t, s, alice, "Alice's sister drinks coffee")
	flush(t, x, 2)

	// The collection was created with the scope fields as facets.
	if reqs := fake.requests(); !slices.Contains(reqs, "POST /collections") {
		t.Fatalf("no collection was created: %v", reqs)
	}
	fake.mu.Lock()
	coll := fake.collections[DefaultTypesenseCollection]
	fake.mu.Unlock()
	for _, f := range []string{"agent", "user", "workspace", "scope_key", "kind"} {
		if !coll.fields[f].facet || coll.fields[f].typ != "string" {
			t.Errorf("field %s is %+v, want a string facet", f, coll.fields[f])
		}
	}
	doc := fake.doc(DefaultTypesenseCollection, string(tea.ID))
	want := map[string]any{"id": string(tea.ID), "kind": "memory", "agent": "default", "user": "user:telegram:alice",
		"workspace": "", "scope_key": alice.key(), "content": "Alice drinks green tea", "session_id": string(tea.SessionID),
		"created_at": float64(t0.UnixMilli())}
	for k, v := range want {
		if doc[k] != v {
			t.Errorf("document %s = %#v, want %#v", k, doc[k], v)
		}
	}

	res := mustSearch(t, s, alice, `"green" -tea*`, 3)
	if len(res) != 1 || res[0].ID != tea.ID {
		t.Fatalf("search returned %v, want the tea memory only", contents(res))
	}
	p := fake.lastSearch()
	for k, v := range map[string]string{
		"q": "green tea", "query_by": "content,tags", "filter_by": "scope_key:=`" + alice.key() + "`",
		"sort_by": "_text_match:desc,created_at:desc", "per_page": "3", "include_fields": "id,scope_key",
	} {
		if p.Get(k) != v {
			t.Errorf("search sent %s=%q, want %q", k, p.Get(k), v)
		}
	}

	// Bob's search carries his own scope and finds nothing of Alice's,
	// through the store and through the index itself.
	if got := mustSearch(t, s, bob, "alice tea coffee drinks", 20); len(got) != 0 {
		t.Fatalf("bob found %v", contents(got))
	}
	if f := fake.lastSearch().Get("filter_by"); !strings.Contains(f, bob.key()) || strings.Contains(f, alice.key()) {
		t.Fatalf("bob's filter_by = %q", f)
	}
	hits, err := s.Index().Search(ctx, bob, "alice tea", 20)
	if err != nil || len(hits) != 0 {
		t.Fatalf("index search as bob = %v, %v", hits, err)
	}
	// A query with no words never reaches the server.
	before := len(fake.requests())
	if got := mustSearch(t, s, alice, `*** "" ()`, 5); len(got) != 0 || len(fake.requests()) != before {
		t.Fatalf("an empty query returned %v or was sent", got)
	}
}

// The index refuses a hit for another scope even if the server returns one.
func TestTypesenseDropsHitsOutsideTheScope(t *testing.T) {
	c := newClock()
	s, x, fake, idx := typesenseStore(t, dbtest.SQLite(t), c)
	mustWrite(t, s, alice, "tea")
	flush(t, x, 1)
	// A server that ignores filter_by.
	fake.mu.Lock()
	for _, d := range fake.collections[DefaultTypesenseCollection].docs {
		d["scope_key"] = bob.key()
	}
	fake.mu.Unlock()
	hits, err := idx.Search(context.Background(), alice, "tea", 5)
	if err != nil || len(hits) != 0 {
		t.Fatalf("hits for a document the server says is bob's: %v, %v", hits, err)
	}
}

// An item written while Typesense is down is queued in its own transaction
// and indexed once Typesense is back, with exponential backoff meanwhile.
func TestQueueRecoversWhenTypesenseComesBack(t *testing.T) {
	for _, down := range []string{"503", "drop"} {
		t.Run(down, func(t *testing.T) {
			dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
				ctx := context.Background()
				db, c := open(t), newClock()
				s, x, fake, _ := typesenseStore(t, db, c)
				fake.setMode(down)
				it := mustWrite(t, s, alice, "the spare key is under the flowerpot")
				queued := func() (attempts int, due time.Time, lastErr string) {
					t.Helper()
					var ms int64
					if err := db.Reader().QueryRowContext(ctx, `SELECT attempts, next_attempt_at, last_error FROM memory_index_queue WHERE item_id = $1`,
						string(it.ID)).Scan(&attempts, &ms, &lastErr); err != nil {
						t.Fatal(err)
					}
					return attempts, dbutil.Time(ms), lastErr
				}
				n, err := x.Flush(ctx)
				if n != 0 || !errors.Is(err, ErrIndexUnavailable) {
					t.Fatalf("Flush while down = %d, %v; want ErrIndexUnavailable", n, err)
				}
				if a, due, lastErr := queued(); a != 1 || !due.Equal(t0.Add(time.Second)) || lastErr == "" {
					t.Fatalf("after one failure: attempts %d, due %s, last error %q; want 1, %s", a, due, lastErr, t0.Add(time.Second))
				}
				if _, err := s.Search(ctx, alice, "spare key", 5); !errors.Is(err, ErrIndexUnavailable) {
					t.Fatalf("search while down = %v", err)
				}
				// The backoff doubles.
				c.Advance(time.Second)
				if _, err := x.Flush(ctx); !errors.Is(err, ErrIndexUnavailable) {
					t.Fatalf("Flush while still down = %v", err)
				}
				if a, due, _ := queued(); a != 2 || !due.Equal(t0.Add(3*time.Second)) {
					t.Fatalf("after two failures: attempts %d, due %s; want 2, %s", a, due, t0.Add(3*time.Second))
				}
				sum, err := s.IndexSummary(ctx, alice, Summary{SessionID: "s1", MessageID: "m1", Content: "Goal: find the spare key"})
				if err != nil {
					t.Fatal(err)
				}

				fake.setMode("")
				flush(t, x, 1) // the summary is due; the memory waits out its backoff
				if n, _ := x.Pending(ctx); n != 1 {
					t.Fatalf("%d queued, want the memory still waiting", n)
				}
				c.Advance(2 * time.Second)
				flush(t, x, 1)
				if n, _ := x.Pending(ctx); n != 0 {
					t.Fatalf("%d still queued", n)
				}
				res := mustSearch(t, s, alice, "spare key", 5)
				if len(res) != 2 {
					t.Fatalf("after recovery found %v", contents(res))
				}
				kinds := []Kind{res[0].Kind, res[1].Kind}
				if !slices.Contains(kinds, KindSummary) || !slices.Contains(kinds, KindMemory) {
					t.Fatalf("found kinds %v, want the memory and the summary", kinds)
				}
				if fake.doc(DefaultTypesenseCollection, string(sum.ID)) == nil {
					t.Fatal("the summary is not in the collection")
				}
			})
		})
	}
}

func TestBackoffIsCapped(t *testing.T) {
	x := NewIndexer(NewStore(nil, nopIndex{}), WithBackoff(time.Second, time.Minute))
	for attempts, want := range map[int64]time.Duration{0: time.Second, 1: 2 * time.Second, 5: 32 * time.Second, 6: time.Minute, 1000: time.Minute} {
		if got := x.backoff(attempts); got != want {
			t.Errorf("backoff(%d) = %s, want %s", attempts, got, want)
		}
	}
}

// Run pushes as writes happen and keeps retrying a down index until it is
// back; cancelling its context stops it.
func TestIndexerRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := dbtest.SQLite(t)
	fake, srv := newFakeTypesense(t, testAPIKey)
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{}
	s := NewStore(db, idx, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	x := NewIndexer(s, WithBackoff(10*time.Millisecond, 50*time.Millisecond), WithPollInterval(time.Second))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()

	mustWrite(t, s, alice, "first")
	waitFor(t, "the first write to be pushed", func() bool { n, _ := x.Pending(ctx); return n == 0 })

	fake.setMode("503")
	mustWrite(t, s, alice, "second")
	waitFor(t, "a failed push", func() bool {
		var a int
		_ = db.Reader().QueryRow(`SELECT COALESCE(max(attempts), 0) FROM memory_index_queue`).Scan(&a)
		return a >= 2
	})
	fake.setMode("")
	waitFor(t, "the second write to be pushed", func() bool { n, _ := x.Pending(ctx); return n == 0 })
	if got := mustSearch(t, s, alice, "second", 5); len(got) != 1 {
		t.Fatalf("found %d", len(got))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
	if !strings.Contains(logs.String(), "memory index push failed") {
		t.Fatalf("the failure was not logged:\n%s", logs.String())
	}
}

// A write that lands while its earlier version is being pushed stays
// queued, so the index ends with the newest content.
func TestQueueKeepsAWriteThatRacedThePush(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s, x, fake, _ := typesenseStore(t, dbtest.SQLite(t), c)
	sum := Summary{SessionID: "s", MessageID: "m", Content: "version one"}
	it, err := s.IndexSummary(ctx, alice, sum)
	if err != nil {
		t.Fatal(err)
	}
	raced := false
	fake.onUpsert = func(string) {
		if !raced {
			raced = true
			sum.Content = "version two"
			if _, err := s.IndexSummary(ctx, alice, sum); err != nil {
				t.Error(err)
			}
		}
	}
	flush(t, x, 1)
	if n, _ := x.Pending(ctx); n != 1 {
		t.Fatalf("the newer write was dropped from the queue (%d pending)", n)
	}
	flush(t, x, 1)
	if got := fake.doc(DefaultTypesenseCollection, string(it.ID))["content"]; got != "version two" {
		t.Fatalf("indexed content = %v", got)
	}
}

func TestTypesenseDeleteAndReindex(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s, x, fake, _ := typesenseStore(t, dbtest.SQLite(t), c)
	keep := mustWrite(t, s, alice, "keep this")
	gone := mustWrite(t, s, alice, "delete this")
	flush(t, x, 2)
	if err := s.Delete(ctx, alice, gone.ID); err != nil {
		t.Fatal(err)
	}
	flush(t, x, 1)
	if fake.doc(DefaultTypesenseCollection, string(gone.ID)) != nil {
		t.Fatal("the deleted memory is still in the collection")
	}
	// Deleting what the index doesn't have succeeds (a retried delete).
	if err := s.Index().Delete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}

	// Items stored with no indexer running, and a stray document in the
	// collection: Reindex leaves exactly the database's items.
	for i := range 450 {
		mustWrite(t, s, bob, fmt.Sprintf("bulk note %d", i))
	}
	fake.mu.Lock()
	fake.collections[DefaultTypesenseCollection].docs["stray"] = map[string]any{"id": "stray"}
	fake.mu.Unlock()
	n, err := s.Reindex(ctx)
	if err != nil || n != 451 {
		t.Fatalf("Reindex = %d, %v; want 451", n, err)
	}
	fake.mu.Lock()
	docs := len(fake.collections[DefaultTypesenseCollection].docs)
	fake.mu.Unlock()
	if docs != 451 || fake.doc(DefaultTypesenseCollection, string(keep.ID)) == nil {
		t.Fatalf("collection holds %d documents after Reindex, want 451 with %s", docs, keep.ID)
	}
	if reqs := fake.requests(); !slices.Contains(reqs, "DELETE /collections/"+DefaultTypesenseCollection) ||
		!slices.Contains(reqs, "POST /collections/"+DefaultTypesenseCollection+"/documents/import") {
		t.Fatalf("Reindex did not drop and import: %v", reqs)
	}
	if got := mustSearch(t, s, bob, "bulk", 20); len(got) != 20 {
		t.Fatalf("found %d after Reindex", len(got))
	}
}

// The API key never shows up in an error, the queue, a log line or a print
// of the options, even when the server quotes the request back.
func TestTypesenseAPIKeyNeverLeaks(t *testing.T) {
	ctx := context.Background()
	db, c := dbtest.SQLite(t), newClock()
	s, x, fake, idx := typesenseStore(t, db, c)
	var logs bytes.Buffer
	x.log = slog.New(slog.NewJSONHandler(&logs, nil))
	fake.setMode("echo")
	mustWrite(t, s, alice, "tea")
	var errs []error
	_, err := x.Flush(ctx)
	errs = append(errs, err)
	_, err = s.Search(ctx, alice, "tea", 5)
	errs = append(errs, err)
	errs = append(errs, idx.Upsert(ctx, Doc{ID: "x", Scope: alice}), idx.Delete(ctx, "x"), idx.Reset(ctx))
	for i, err := range errs {
		if err == nil {
			t.Fatalf("error %d is nil while the server is failing", i)
		}
		if !strings.Contains(err.Error(), "Api-Key") {
			t.Fatalf("error %d doesn't quote the response, so this test proves nothing: %v", i, err)
		}
		if strings.Contains(err.Error(), testAPIKey) {
			t.Fatalf("error %d leaks the API key: %v", i, err)
		}
		for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
			if strings.Contains(u.Error(), testAPIKey) {
				t.Fatalf("a wrapped error leaks the API key: %v", u)
			}
		}
	}
	var lastErr string
	if err := db.Reader().QueryRow(`SELECT last_error FROM memory_index_queue`).Scan(&lastErr); err != nil || lastErr == "" || strings.Contains(lastErr, testAPIKey) {
		t.Fatalf("queue last_error = %q (%v)", lastErr, err)
	}

	// A wrong key says what to check, without echoing either key.
	fake.setMode("")
	bad, err := NewTypesense(TypesenseOptions{URL: fakeURL(t, idx), APIKey: "wrong-key-123"})
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Ensure(ctx)
	if err == nil || errors.Is(err, ErrIndexUnavailable) || !strings.Contains(err.Error(), "api key") || strings.Contains(err.Error(), "wrong-key-123") {
		t.Fatalf("Ensure with a wrong key = %v", err)
	}

	opts := TypesenseOptions{URL: "http://ts:8108", APIKey: testAPIKey, Collection: "c"}
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "typesense", opts)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "typesense", opts)
	for _, s := range []string{fmt.Sprint(opts), fmt.Sprintf("%v %+v %#v %s", opts, opts, opts, opts), logs.String()} {
		if strings.Contains(s, testAPIKey) {
			t.Fatalf("the API key is printed: %s", s)
		}
	}
}

func fakeURL(t *testing.T, idx *Typesense) string {
	t.Helper()
	return idx.server
}

func TestNewTypesenseChecksOptions(t *testing.T) {
	for _, tc := range []struct {
		opts TypesenseOptions
		want string
	}{
		{TypesenseOptions{URL: "localhost:8108", APIKey: "k"}, "http:// or https://"},
		{TypesenseOptions{URL: "ftp://x", APIKey: "k"}, "http:// or https://"},
		{TypesenseOptions{URL: "http://user:" + testAPIKey + "@x", APIKey: "k"}, "not in the url"},
		{TypesenseOptions{URL: "http://x"}, "api key is empty"},
		{TypesenseOptions{URL: "http://x", APIKey: "k", Collection: "bad name"}, "collection"},
	} {
		_, err := NewTypesense(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), testAPIKey) {
			t.Errorf("NewTypesense(%v) = %v, want an error saying %q", tc.opts, err, tc.want)
		}
	}
}

// A collection someone made without the scope fields is refused, not
// searched unfiltered.
func TestTypesenseRefusesACollectionWithoutScopeFields(t *testing.T) {
	fake, srv := newFakeTypesense(t, testAPIKey)
	fake.collections["parley_memory"] = &fakeCollection{
		schema: map[string]any{"name": "parley_memory", "fields": []any{map[string]any{"name": "content", "type": "string"}}},
		fields: map[string]fakeField{"content": {typ: "string"}}, docs: map[string]map[string]any{},
	}
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Ensure(context.Background()); err == nil || !strings.Contains(err.Error(), "without the field") {
		t.Fatalf("Ensure = %v", err)
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A document the index refuses is retried later without holding up the rest.
func TestFlushGoesOnPastARefusedDocument(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s, x, fake, _ := typesenseStore(t, dbtest.SQLite(t), c)
	fake.reject = "poison"
	mustWrite(t, s, alice, "poison")
	c.Advance(time.Millisecond)
	mustWrite(t, s, alice, "fine")
	n, err := x.Flush(ctx)
	if n != 1 || err == nil || errors.Is(err, ErrIndexUnavailable) || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("Flush = %d, %v; want 1 pushed and the refusal reported", n, err)
	}
	if p, _ := x.Pending(ctx); p != 1 {
		t.Fatalf("%d pending, want the refused one", p)
	}
	if got := mustSearch(t, s, alice, "fine", 5); len(got) != 1 {
		t.Fatal("the good document was held up")
	}
}

// The tools tell the model the index is down without naming hosts, and log
// the detail.
func TestToolsWhenTypesenseIsDown(t *testing.T) {
	db, c := dbtest.SQLite(t), newClock()
	fake, srv := newFakeTypesense(t, testAPIKey)
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{}
	s := NewStore(db, idx, WithClock(c.Now), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	fake.setMode("503")
	// Writing still works: the write is queued for the index.
	if _, err := call(t, WriteTool(s), aliceKey, "s", `{"content": "tea"}`); err != nil {
		t.Fatalf("memory_write while the index is down: %v", err)
	}
	_, err = call(t, SearchTool(s), aliceKey, "s", `{"query": "tea"}`)
	if err == nil || !strings.Contains(err.Error(), "unavailable right now") || strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("memory_search while the index is down = %v", err)
	}
	if !strings.Contains(logs.String(), "memory tool failed") || !strings.Contains(logs.String(), "503") {
		t.Fatalf("the failure was not logged with its cause:\n%s", logs.String())
	}
}

// On a SQLite file this process holds, the indexer's polls read nothing
// while nothing is written; a write by another store on the database, which
// does not wake this indexer, is pushed at the next poll.
func TestIdleIndexerLeavesTheDatabaseAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	db := dbtest.SQLite(t)
	db.HoldsFile()
	reads := dbtest.CountReads(db)
	_, srv := newFakeTypesense(t, testAPIKey)
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(db, idx)
	x := NewIndexer(s, WithBackoff(time.Millisecond, 50*time.Millisecond), WithPollInterval(10*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	if n := dbtest.IdleReads(reads, 300*time.Millisecond); n != 0 { // thirty polls
		t.Fatalf("an idle indexer read the database %d times in thirty polls", n)
	}
	other := NewStore(db, idx) // its writes wake its own indexer, not x
	mustWrite(t, other, alice, "written elsewhere")
	waitFor(t, "the write to be pushed by a poll", func() bool { n, _ := x.Pending(ctx); return n == 0 })
	if got := mustSearch(t, s, alice, "elsewhere", 5); len(got) != 1 {
		t.Fatalf("found %d", len(got))
	}
}

// A server behind a path prefix (a reverse proxy's /typesense/) keeps its
// prefix on every request, and a document id is escaped as one segment.
func TestTypesenseBehindAPathPrefix(t *testing.T) {
	ctx := context.Background()
	fake := &fakeTypesense{t: t, key: testAPIKey, collections: map[string]*fakeCollection{}}
	mux := http.NewServeMux()
	mux.Handle("/typesense/", http.StripPrefix("/typesense", fake))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL + "/typesense/", APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	doc := Doc{ID: "odd id?#", Scope: alice, Kind: "memory", Content: "tea by the window", CreatedAt: t0}
	if err := idx.Upsert(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if fake.doc(DefaultTypesenseCollection, string(doc.ID)) == nil {
		t.Fatalf("the document was not stored under its id: %v", fake.requests())
	}
	hits, err := idx.Search(ctx, alice, "window", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != doc.ID || hits[0].Score <= 0 {
		t.Fatalf("Search = %+v, %v", hits, err)
	}
	if err := idx.Delete(ctx, doc.ID); err != nil {
		t.Fatal(err)
	}
	if fake.doc(DefaultTypesenseCollection, string(doc.ID)) != nil {
		t.Fatal("the document is still there after Delete")
	}
	want := []string{"GET /collections/parley_memory", "POST /collections", "POST /collections/parley_memory/documents",
		"GET /collections/parley_memory/documents/search", "DELETE /collections/parley_memory/documents/odd id?#"}
	if got := fake.requests(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}

// After most of a run of requests failed at the connection (over 100 in two
// minutes), the official client's circuit breaker stops sending for a
// minute: the queue sees the index unavailable, with a reason, and the
// server is left alone meanwhile.
func TestTypesensePausesWhenMostRequestsFail(t *testing.T) {
	ctx := context.Background()
	fake, srv := newFakeTypesense(t, testAPIKey)
	idx, err := NewTypesense(TypesenseOptions{URL: srv.URL, APIKey: testAPIKey, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fake.setMode("drop")
	for i := range 101 {
		if err := idx.Delete(ctx, ItemID(fmt.Sprint("m", i))); !errors.Is(err, ErrIndexUnavailable) {
			t.Fatalf("delete %d with the server dropping connections = %v", i, err)
		}
	}
	sent := len(fake.requests())
	fake.setMode("")
	err = idx.Delete(ctx, "m-next")
	if !errors.Is(err, ErrIndexUnavailable) || !strings.Contains(err.Error(), "circuit breaker") {
		t.Fatalf("delete after 101 failures = %v, want the client's pause", err)
	}
	if n := len(fake.requests()); n != sent {
		t.Fatalf("the request reached the server (%d requests, %d before) while the client pauses", n, sent)
	}
}
