package sessions

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
)

// Resolve must be an index lookup, never a scan, however many sessions exist.
func TestActiveSessionQueryUsesIndex(t *testing.T) {
	db := dbtest.SQLite(t)
	rows, err := db.Reader().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+activeSessionQuery, "telegram", "1", "default", "1", "")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "USING INDEX sessions_active_key") || strings.Contains(got, "SCAN") {
		t.Fatalf("active-session lookup plan is %q, want a search of sessions_active_key", got)
	}

	rows2, err := db.Reader().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+liveMessagesQuery, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows2.Close()
	plan = plan[:0]
	for rows2.Next() {
		var id, parent, notused int
		var detail string
		if err := rows2.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if got := strings.Join(plan, "; "); strings.Contains(got, "SCAN messages") {
		t.Fatalf("live context plan scans messages: %q", got)
	}
}

// The last turns are read by walking the (session_id, seq) index back from
// the newest message, never by scanning the session's whole log.
func TestRecentMessagesQueryUsesIndex(t *testing.T) {
	db := dbtest.SQLite(t)
	rows, err := db.Reader().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+recentMessagesQuery, "x", 29)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	got := strings.Join(plan, "; ")
	t.Logf("plan: %s", got)
	if strings.Contains(got, "SCAN messages") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("recent-messages plan is %q, want index searches only", got)
	}
}
