package migrations

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
)

func TestParseUp(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
		noTx       bool
		err        string
	}{
		{name: "statements", text: "-- +goose Up\nCREATE TABLE a (x int);\n\n-- why b\nCREATE TABLE b (\n  y int -- a comment; not the end\n);\n",
			want: []string{"CREATE TABLE a (x int);", "CREATE TABLE b (\n  y int -- a comment; not the end\n);"}},
		{name: "a comment after the semicolon", text: "-- +goose Up\nDROP INDEX a; -- gone\n", want: []string{"DROP INDEX a; -- gone"}},
		{name: "leading comments and blank lines", text: "\n-- header\n-- +goose Up\n-- what it does\n\nSELECT 1;\n",
			want: []string{"SELECT 1;"}},
		{name: "a block", text: "-- +goose Up\n-- +goose StatementBegin\nCREATE FUNCTION f() RETURNS int AS $$\nBEGIN\n  RETURN 1;\nEND\n$$ LANGUAGE plpgsql;\n-- +goose StatementEnd\nSELECT f();\n",
			want: []string{"CREATE FUNCTION f() RETURNS int AS $$\nBEGIN\n  RETURN 1;\nEND\n$$ LANGUAGE plpgsql;", "SELECT f();"}},
		{name: "no transaction", text: "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY i ON t (x);\n",
			want: []string{"CREATE INDEX CONCURRENTLY i ON t (x);"}, noTx: true},
		{name: "a down section is not run", text: "-- +goose Up\nCREATE TABLE a (x int);\n-- +goose Down\nDROP TABLE a;\n",
			want: []string{"CREATE TABLE a (x int);"}},
		{name: "missing semicolon", text: "-- +goose Up\nCREATE TABLE a (x int)\n", err: "missing semicolon"},
		{name: "no up", text: "CREATE TABLE a (x int);\n", err: "must start with -- +goose Up"},
		{name: "unclosed block", text: "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n", err: "without StatementEnd"},
		{name: "unknown annotation", text: "-- +goose Up\n-- +goose ENVSUB ON\nSELECT 1;\n", err: "unsupported annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, useTx, err := parseUp(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || useTx == tc.noTx {
				t.Fatalf("parseUp = %q, tx %v, %v; want %q, tx %v", got, useTx, err, tc.want, !tc.noTx)
			}
		})
	}
}

// Every shipped migration parses, into at least one statement.
func TestShippedMigrationsParse(t *testing.T) {
	for _, d := range []string{"sqlite", "postgres"} {
		sources, err := sourcesOf(dbutil.Dialect(d))
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range sources {
			text, err := files.ReadFile(d + "/" + src.Path)
			if err != nil {
				t.Fatal(err)
			}
			stmts, useTx, err := parseUp(string(text))
			if err != nil || len(stmts) == 0 || !useTx {
				t.Errorf("%s/%s: %d statements, tx %v, %v", d, src.Path, len(stmts), useTx, err)
			}
		}
	}
}
