package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The OpenAPI validator and the generated client are for tests: the
// parley binary imports neither (nor kin-openapi through them).
func TestBinaryLeavesOutTheTestOnlyAPIPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/parley").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var seen int
	for _, p := range strings.Fields(string(out)) {
		if p == "github.com/parleyd/parley/api" {
			seen++
		}
		if strings.HasPrefix(p, "github.com/getkin/") || p == "github.com/parleyd/parley/api/openapitest" ||
			p == "github.com/parleyd/parley/api/apiclient" || strings.HasPrefix(p, "github.com/oapi-codegen/oapi-codegen") {
			t.Errorf("the parley binary imports %s", p)
		}
	}
	if seen == 0 {
		t.Fatal("go list -deps ../cmd/parley doesn't list the api package; the check reads the wrong list")
	}
}
