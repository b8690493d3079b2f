package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/parleyd/parley/dbutil/dbtest"
	"github.com/parleyd/parley/migrations"
)

// A fresh install and a step-by-step upgrade, one release at a time, must
// leave the same schema.
func TestFreshInstallMatchesStepwiseUpgrade(t *testing.T) {
	for _, e := range dbtest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			fresh := e.Raw(t)
			n, err := migrations.Up(ctx, fresh, nil)
			if err != nil {
				t.Fatal(err)
			}
			latest, err := migrations.Latest(fresh.Dialect)
			if err != nil {
				t.Fatal(err)
			}
			if n < 2 || int64(n) != latest {
				t.Fatalf("fresh install applied %d migrations, want all %d (and at least 2, so the upgrade path is exercised)", n, latest)
			}

			stepwise := e.Raw(t)
			for v := int64(1); v <= latest; v++ {
				// A new provider per step, as each release's binary would make.
				p, err := migrations.Provider(stepwise, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(ctx, v); err != nil {
					t.Fatalf("upgrade to %d: %v", v, err)
				}
				got, err := p.GetDBVersion(ctx)
				if err != nil || got != v {
					t.Fatalf("after upgrade to %d the database is at %d (%v)", v, got, err)
				}
			}

			a, b := dbtest.Schema(t, fresh), dbtest.Schema(t, stepwise)
			if !strings.Contains(a, "sessions_active_key") {
				t.Fatalf("schema dump is missing the active-key index:\n%s", a)
			}
			if a != b {
				t.Fatalf("schemas differ\nfresh:\n%s\nstepwise:\n%s", a, b)
			}

			// Running again is a no-op.
			n, err = migrations.Up(ctx, fresh, nil)
			if err != nil || n != 0 {
				t.Fatalf("second Up applied %d (%v), want 0", n, err)
			}
		})
	}
}
