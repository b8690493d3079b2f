package files_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/files"
	"github.com/parleyd/parley/sessions"
	"github.com/parleyd/parley/tools"
)

// An agent writes a CSV, lists it, reads it back and deletes it, in its
// own session's files only.
func TestFileTools(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	ss := sessions.NewStore(db)
	store := files.NewStore(db, files.Limits{MaxFileBytes: 50, MaxSessionBytes: 100, MaxTotalBytes: 100}, nil)
	s, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", "1", "u1", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := ss.Resolve(ctx, sessions.ChatKey("telegram", "2", "u2", "default"), sessions.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tools.Tool{}
	for _, tl := range files.Tools(store) {
		byName[tl.Name] = tl
	}
	call := func(session sessions.ID, name string, args any) (string, error) {
		raw, _ := json.Marshal(args)
		return byName[name].Run(ctx, tools.Call{Name: name, SessionID: session, Arguments: raw})
	}
	for _, step := range []struct {
		session sessions.ID
		tool    string
		args    any
		want    string
		wantErr string
	}{
		{s.ID, files.WriteToolName, map[string]string{"name": "report.csv", "content": "a,b\n1,2\n"}, "Wrote report.csv (text/csv, 8 bytes)", ""},
		{s.ID, files.ListToolName, map[string]string{}, "- report.csv (text/csv, 8 bytes)", ""},
		{s.ID, files.ReadToolName, map[string]string{"name": "report.csv"}, "a,b\n1,2\n", ""},
		{other.ID, files.ReadToolName, map[string]string{"name": "report.csv"}, "", "no such file"},
		{s.ID, files.WriteToolName, map[string]string{"name": "big.txt", "content": strings.Repeat("x", 51)}, "", "sessions.files.max_file_bytes"},
		{s.ID, files.DeleteToolName, map[string]string{"name": "report.csv"}, "Deleted report.csv.", ""},
		{s.ID, files.ListToolName, map[string]string{}, "This conversation has no files.", ""},
	} {
		got, err := call(step.session, step.tool, step.args)
		switch {
		case step.wantErr != "" && (err == nil || !strings.Contains(err.Error(), step.wantErr)):
			t.Errorf("%s %v: %q, %v; want an error naming %q", step.tool, step.args, got, err, step.wantErr)
		case step.wantErr == "" && (err != nil || !strings.Contains(got, step.want)):
			t.Errorf("%s %v: %q, %v; want %q", step.tool, step.args, got, err, step.want)
		}
	}
}
