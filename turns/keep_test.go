package turns

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
)

// Only a rerun (a message recovered after a crash, or taken over) looks
// in the session's store for a file an earlier try kept, and reads it
// from there; a first try, which can't find one, fetches the file from
// its channel and keeps it, without looking.
func TestOnlyARerunReadsAKeptFile(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		s, _, err := sessions.NewStore(db).Resolve(ctx, sessions.CLIKey("u", "main"), sessions.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		store := files.NewStore(db, files.Limits{}, nil)
		fetches := 0
		rec := fetchingRecorder{adapterstest.New(), map[string][]byte{"a": []byte("from the channel")}}
		d := New(Options{Files: store, Channel: func(id adapters.ID) (adapters.Adapter, bool) {
			fetches++
			return rec, id == "tg"
		}})
		msgs := []adapters.Inbound{{Adapter: "tg", Files: []adapters.FileRef{{ID: "a", Name: "a.txt", MediaType: "text/plain"}}}}
		ids := []string{uuid.NewString()}
		name := storedName(msgs[0].Files[0], ids[0], 0)
		if _, err := store.Put(ctx, s.ID, name, "text/plain", []byte("kept by an earlier try")); err != nil {
			t.Fatal(err)
		}

		got := d.newFetch(ctx, s.ID, msgs, ids, true).file(0, 0)
		if got.err != nil || string(got.data) != "kept by an earlier try" || got.stored != name || fetches != 0 {
			t.Fatalf("a rerun read %q (%v, stored %q) with %d fetches; want the kept copy and no fetch", got.data, got.err, got.stored, fetches)
		}
		got = d.newFetch(ctx, s.ID, msgs, ids, false).file(0, 0)
		if got.err != nil || string(got.data) != "from the channel" || got.stored != name || fetches != 1 {
			t.Fatalf("a first try read %q (%v, stored %q) with %d fetches; want the channel's bytes, kept", got.data, got.err, got.stored, fetches)
		}
		if kept, err := store.Get(ctx, s.ID, name); err != nil || string(kept.Data) != "from the channel" {
			t.Fatalf("the store holds %q, %v; want what the first try fetched", kept.Data, err)
		}
	})
}
