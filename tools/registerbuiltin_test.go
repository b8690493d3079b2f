package tools_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/tools"
)

// clock is a part a test tool is made over.
type clock struct{ now string }

// A new built-in tool is one registration in its own package: a daemon's
// registry then has it, made over the parts the daemon provides (found by
// type), and the names config check reads come from the same
// registration, made with no parts.
func TestRegisterBuiltin(t *testing.T) {
	var madeWith []*clock
	tools.RegisterBuiltin("test_clock", func(deps tools.Deps) []tools.Tool {
		c := tools.Part[*clock](deps)
		madeWith = append(madeWith, c)
		return []tools.Tool{{Name: "clock_now", Description: "What time it is.",
			Run: func(context.Context, tools.Call) (string, error) { return c.now, nil }}}
	})

	names, err := tools.BuiltinNames()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "clock_now") {
		t.Fatalf("BuiltinNames() = %q, missing clock_now", names)
	}
	if len(madeWith) != 1 || madeWith[0] != nil {
		t.Fatalf("names were read with parts %v; want none", madeWith)
	}

	reg := tools.NewRegistry()
	deps := tools.Deps{Config: func() *config.Config { return &config.Config{} }}
	deps.Provide(&clock{now: "noon"}, "an unrelated part")
	if err := tools.RegisterBuiltins(reg, deps); err != nil {
		t.Fatal(err)
	}
	res := reg.Call(context.Background(), tools.Call{Name: "clock_now", Arguments: json.RawMessage(`{}`)})
	if res.IsError || res.Content != "noon" {
		t.Fatalf("clock_now = %+v; want noon, made over the part provided", res)
	}
	if got := tools.Part[string](deps); got != "an unrelated part" {
		t.Fatalf("Part[string] = %q", got)
	}
	if got := tools.Part[*int](deps); got != nil {
		t.Fatalf("a part not provided is %v; want nil", got)
	}

	defer func() {
		if recover() == nil {
			t.Fatal("a second registration under one name did not panic")
		}
	}()
	tools.RegisterBuiltin("test_clock", func(tools.Deps) []tools.Tool { return nil })
}
