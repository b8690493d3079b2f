package migrations

import (
	"database/sql"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil"
)

// The migrations run through goose itself (goose.NewProvider), not through
// a runner that reproduces its table and lock: the package links goose.
func TestMigrationsRunThroughGoose(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, want := range []string{"github.com/pressly/goose/v3", "github.com/pressly/goose/v3/lock"} {
		if !strings.Contains(" "+strings.Join(deps, " ")+" ", " "+want+" ") {
			t.Errorf("the migrations package does not import %s", want)
		}
	}
}

// Every shipped migration loads into goose's provider, each runs in a
// transaction (none says NO TRANSACTION), and goose numbers them as the
// files are named.
func TestShippedMigrationsLoadInGoose(t *testing.T) {
	for _, d := range []dbutil.Dialect{dbutil.SQLite, dbutil.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			conn, err := sql.Open("sqlite", "")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			p, _, err := newGoose(d, conn, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			versions, err := versionsOf(d)
			if err != nil {
				t.Fatal(err)
			}
			sources := p.ListSources()
			if len(sources) != len(versions) || len(sources) < 2 {
				t.Fatalf("goose loads %d migrations, the folder holds %d", len(sources), len(versions))
			}
			for i, src := range sources {
				if src.Version != versions[i] {
					t.Errorf("goose numbers %s as %d, want %d", src.Path, src.Version, versions[i])
				}
				text, err := files.ReadFile(string(d) + "/" + src.Path)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(text), "-- +goose Up") || strings.Contains(string(text), "NO TRANSACTION") {
					t.Errorf("%s/%s: want a -- +goose Up section run in one transaction", d, src.Path)
				}
			}
		})
	}
}
