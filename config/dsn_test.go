package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
)

// config check refuses a PostgreSQL URL whose password holds an unescaped
// @, as the driver would read it, without showing any part of it.
func TestConfigCheckRefusesAnAtInThePassword(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.yaml")
	if err := os.WriteFile(path, []byte("database:\n  url: postgres://bob:h7q2@zk9w@db.example:5432/parley\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	if err == nil || !strings.Contains(err.Error(), "%40") {
		t.Fatalf("load: %v, want the @ refused", err)
	}
	for _, part := range []string{"h7q2", "zk9w"} {
		if strings.Contains(err.Error(), part) {
			t.Fatalf("the error shows %q of the password: %v", part, err)
		}
	}
}
