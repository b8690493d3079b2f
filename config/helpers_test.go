package config

import (
	"errors"
	"testing"
)

const testFile = "parley.yaml"

// env returns a getenv backed by a map.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// problemsOf returns the Problems inside err, failing the test if there are
// none.
func problemsOf(t *testing.T, err error) Problems {
	t.Helper()
	if err == nil {
		t.Fatal("Parse returned no error")
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not Problems: %v", err, err)
	}
	return ps
}

// mustParse parses src, failing the test on any problem.
func mustParse(t *testing.T, src string, vars map[string]string) *Config {
	t.Helper()
	c, err := Parse([]byte(src), testFile, env(vars))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return c
}
