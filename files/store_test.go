package files_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
)

func TestFileStoreOnBothEngines(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		ss := sessions.NewStore(db)
		store := files.NewStore(db, files.Limits{MaxFileBytes: 100, MaxSessionBytes: 150, MaxTotalBytes: 250}, nil)
		session := func(chat string) sessions.ID {
			s, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", chat, "u"+chat, "default"), sessions.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			return s.ID
		}
		a, b, c := session("1"), session("2"), session("3")
		bin := append([]byte{0, 1, 2, 0xff}, bytes.Repeat([]byte("x"), 76)...) // 80 bytes, not text
		if _, err := store.Put(ctx, a, "report.csv", "text/csv", bin); err != nil {
			t.Fatal(err)
		}
		f, err := store.Get(ctx, a, "report.csv")
		if err != nil || !bytes.Equal(f.Data, bin) || f.MediaType != "text/csv" || f.Size != 80 {
			t.Fatalf("Get = %+v, %v; want the bytes back", f, err)
		}
		if _, err := store.Get(ctx, b, "report.csv"); !errors.Is(err, files.ErrNotFound) {
			t.Fatalf("another session reads it: %v", err)
		}
		for _, tc := range []struct {
			name    string
			id      sessions.ID
			file    string
			size    int
			want    error
			limitIs string
		}{
			{"over the file limit", a, "big.bin", 101, files.ErrFileTooLarge, "sessions.files.max_file_bytes"},
			{"over the session limit", a, "more.bin", 71, files.ErrSessionFull, "sessions.files.max_session_bytes"},
			{"a path", a, "../etc/passwd", 1, files.ErrInvalidName, ""},
			{"no session", "nope", "x.txt", 1, files.ErrNoSession, ""},
		} {
			_, err := store.Put(ctx, tc.id, tc.file, "", make([]byte, tc.size))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.limitIs) {
				t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.want, tc.limitIs)
			}
		}
		// Replacing a file counts it once.
		if _, err := store.Put(ctx, a, "report.csv", "text/csv", make([]byte, 100)); err != nil {
			t.Fatalf("replacing within the limit: %v", err)
		}
		if _, err := store.Put(ctx, b, "b.bin", "", make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Put(ctx, c, "c.bin", "", make([]byte, 60)); !errors.Is(err, files.ErrStoreFull) || !strings.Contains(err.Error(), "sessions.files.max_total_bytes") {
			t.Fatalf("over the deployment's limit: %v", err)
		}
		if err := store.Copy(ctx, a, c); err != nil {
			t.Fatal(err)
		}
		if list, err := store.List(ctx, c); err != nil || len(list) != 1 || list[0].Name != "report.csv" || list[0].Size != 100 {
			t.Fatalf("the copy's files = %+v, %v", list, err)
		}
		if found, err := store.Delete(ctx, a, "report.csv"); err != nil || !found {
			t.Fatalf("Delete = %v, %v", found, err)
		}
		if u, err := store.Usage(ctx, a); err != nil || u.Files != 0 || u.Bytes != 0 {
			t.Fatalf("usage after delete = %+v, %v", u, err)
		}
		// Deleting the session deletes its files.
		if err := ss.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		if list, err := store.List(ctx, b); err != nil || len(list) != 0 {
			t.Fatalf("a deleted session's files = %+v, %v", list, err)
		}
	})
}

// A file larger than a chunk is kept in chunks and read back whole, through
// Open a chunk at a time; a branch's copy is its own; writing it again or
// deleting it (or its session) leaves no chunk behind.
func TestLargeFilesInChunks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		ss := sessions.NewStore(db)
		store := files.NewStore(db, files.Limits{}, nil)
		session := func(chat string) sessions.ID {
			s, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", chat, "u"+chat, "default"), sessions.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			return s.ID
		}
		chunks := func(id sessions.ID) int {
			t.Helper()
			var n int
			if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM session_file_chunks WHERE session_id = $1`, string(id)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		a, b := session("1"), session("2")
		big := make([]byte, 2*files.ChunkSize+12345)
		for i := range big {
			big[i] = byte(i * 7)
		}
		if _, err := store.PutFrom(ctx, a, "video.bin", "", bytes.NewReader(big), int64(len(big))); err != nil {
			t.Fatal(err)
		}
		if n := chunks(a); n != 3 {
			t.Fatalf("%d chunks for %d bytes, want 3", n, len(big))
		}
		f, body, err := store.Open(ctx, a, "video.bin")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(body)
		body.Close()
		if err != nil || !bytes.Equal(got, big) || f.Size != int64(len(big)) {
			t.Fatalf("read back %d bytes (%v), want the %d stored", len(got), err, len(big))
		}
		if err := store.Copy(ctx, a, b); err != nil {
			t.Fatal(err)
		}
		if g, err := store.Get(ctx, b, "video.bin"); err != nil || !bytes.Equal(g.Data, big) || chunks(b) != 3 {
			t.Fatalf("the copy: %d bytes, %d chunks, %v", len(g.Data), chunks(b), err)
		}
		// A short read is refused, and the file stays as it was.
		if _, err := store.PutFrom(ctx, a, "video.bin", "", bytes.NewReader(big[:10]), int64(len(big))); err == nil {
			t.Fatal("a file that ended short was stored")
		}
		if g, err := store.Get(ctx, a, "video.bin"); err != nil || !bytes.Equal(g.Data, big) {
			t.Fatalf("after a refused write: %d bytes, %v", len(g.Data), err)
		}
		// Written again small: whole, its chunks gone; the copy keeps its own.
		if _, err := store.Put(ctx, a, "video.bin", "", []byte("tiny")); err != nil {
			t.Fatal(err)
		}
		if g, err := store.Get(ctx, a, "video.bin"); err != nil || string(g.Data) != "tiny" || chunks(a) != 0 || chunks(b) != 3 {
			t.Fatalf("written again: %q, %d chunks here, %d in the copy, %v", g.Data, chunks(a), chunks(b), err)
		}
		if _, err := store.Delete(ctx, b, "video.bin"); err != nil || chunks(b) != 0 {
			t.Fatalf("deleted: %d chunks left, %v", chunks(b), err)
		}
		if _, err := store.Put(ctx, b, "again.bin", "", big); err != nil || chunks(b) != 3 {
			t.Fatalf("stored again: %d chunks, %v", chunks(b), err)
		}
		if err := ss.Delete(ctx, b); err != nil || chunks(b) != 0 {
			t.Fatalf("session deleted: %d chunks left, %v", chunks(b), err)
		}
	})
}

// The store's total and each session's usage, which the limits' checks and
// Usage read instead of adding up files, follow every change: a file
// stored (whole and in chunks), replaced, refused, deleted, copied to
// another session and to a branch as it is made, and a session deleted
// with its files.
func TestUsageFollowsEveryChange(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, open dbtest.Opener) {
		ctx := context.Background()
		db := open(t)
		ss := sessions.NewStore(db)
		store := files.NewStore(db, files.Limits{MaxSessionBytes: 3 * files.ChunkSize}, nil)
		var all []sessions.ID
		check := func(what string) {
			t.Helper()
			var kept, sum int64
			if err := db.Reader().QueryRowContext(ctx, `SELECT bytes FROM file_store_usage WHERE id = 1`).Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if err := db.Reader().QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_files`).Scan(&sum); err != nil {
				t.Fatal(err)
			}
			if kept != sum {
				t.Fatalf("after %s: the kept total is %d, the files add up to %d", what, kept, sum)
			}
			for _, id := range all {
				var files, bytes int64
				if err := db.Reader().QueryRowContext(ctx, `SELECT count(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM session_files WHERE session_id = $1`, string(id)).Scan(&files, &bytes); err != nil {
					t.Fatal(err)
				}
				u, err := store.Usage(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if u.Files != int(files) || u.Bytes != bytes {
					t.Fatalf("after %s: session %s's usage is %d files, %d bytes; its files are %d, %d bytes", what, id, u.Files, u.Bytes, files, bytes)
				}
			}
			var orphans int
			if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM session_file_usage u WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = u.session_id)`).Scan(&orphans); err != nil {
				t.Fatal(err)
			}
			if orphans != 0 {
				t.Fatalf("after %s: %d usage rows of deleted sessions", what, orphans)
			}
		}
		session := func(chat string) sessions.ID {
			s, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", chat, "u"+chat, "default"), sessions.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, s.ID)
			return s.ID
		}
		a, b := session("1"), session("2")
		check("nothing")
		for i, size := range []int{10, 2000, files.ChunkSize + 5} {
			if _, err := store.Put(ctx, a, fmt.Sprintf("f%d", i), "", make([]byte, size)); err != nil {
				t.Fatal(err)
			}
		}
		check("three files stored")
		if _, err := store.Put(ctx, a, "f1", "", make([]byte, 7)); err != nil {
			t.Fatal(err)
		}
		check("a file replaced by a smaller one")
		if _, err := store.Put(ctx, a, "f2", "", make([]byte, 2*files.ChunkSize)); err != nil {
			t.Fatal(err)
		}
		check("a chunked file replaced by a larger one")
		if _, err := store.Put(ctx, a, "f3", "", make([]byte, files.ChunkSize)); !errors.Is(err, files.ErrSessionFull) {
			t.Fatalf("past the session's limit: %v", err)
		}
		check("a file refused")
		if _, err := store.Delete(ctx, a, "f0"); err != nil {
			t.Fatal(err)
		}
		check("a file deleted")
		if err := store.Copy(ctx, a, b); err != nil {
			t.Fatal(err)
		}
		check("the files copied to another session")
		m, err := ss.Append(ctx, a, sessions.Message{Role: sessions.RoleUser, Content: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		branch, err := ss.Branch(ctx, a, m.ID, sessions.BranchOptions{Also: func(ctx context.Context, q dbutil.Querier, parent, branch sessions.ID) error {
			return files.CopyIn(ctx, q, parent, branch)
		}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, branch.ID)
		check("a branch made with the files")
		if u, err := store.Usage(ctx, branch.ID); err != nil || u.Files != 2 {
			t.Fatalf("the branch's usage = %+v, %v; want its two files", u, err)
		}
		if err := ss.Delete(ctx, a); err != nil {
			t.Fatal(err)
		}
		check("a session deleted with its files")
		if u, err := store.Usage(ctx, a); err != nil || u.Files != 0 || u.Bytes != 0 {
			t.Fatalf("a deleted session's usage = %+v, %v", u, err)
		}
		// The branch's own files stay, and count against its own limit.
		if _, err := store.Put(ctx, branch.ID, "f3", "", make([]byte, files.ChunkSize)); !errors.Is(err, files.ErrSessionFull) {
			t.Fatalf("the branch past its limit: %v", err)
		}
		if _, err := store.Put(ctx, branch.ID, "f2", "", make([]byte, 3*files.ChunkSize-7)); err != nil {
			t.Fatalf("the branch replacing its file up to its limit: %v", err)
		}
		check("the branch's file replaced")
	})
}
