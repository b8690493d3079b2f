package sessionhooks

import (
	"testing"
	"time"
)

// A message's synchronous POSTs are remembered for postsFor, then let go
// of: a later POST's bookkeeping prunes them, and keeps the same id for
// a message tried again within it.
func TestSyncPostsAreLetGo(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := New(Options{Now: func() time.Time { return now }})
	first, err := h.deliveryID("m1", "https://hooks.example/a")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(postsFor / 2)
	if again, _ := h.deliveryID("m1", "https://hooks.example/a"); again != first {
		t.Fatalf("a try again within postsFor got delivery id %s, want %s", again, first)
	}
	now = now.Add(postsFor + time.Minute)
	if _, err := h.deliveryID("m2", "https://hooks.example/a"); err != nil {
		t.Fatal(err)
	}
	if _, kept := h.posts["m1"]; kept || len(h.posts) != 1 {
		t.Fatalf("after postsFor, %d messages remembered (m1 kept: %v); want only m2", len(h.posts), kept)
	}
}
