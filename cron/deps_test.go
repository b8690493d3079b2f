package cron_test

import (
	"os/exec"
	"strings"
	"testing"
)

// cron reads chat commands from the commands package: it never needs the
// gateway, which it sits beside.
func TestCronDoesNotImportTheGateway(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/parleyd/parley/gateway" {
			t.Fatal("cron imports the gateway")
		}
	}
}
