package tools

import (
	"context"
	"encoding/json"
	"testing"
)

func TestDecode(t *testing.T) {
	type args struct {
		Name  *string           `json:"name"`
		Count int               `json:"count"`
		Ratio float64           `json:"ratio"`
		On    bool              `json:"on"`
		Tags  []string          `json:"tags"`
		Sizes []int             `json:"sizes"`
		Meta  map[string]string `json:"meta"`
		Inner struct {
			Deep []string `json:"deep"`
		} `json:"inner"`
		Untagged string
		Hidden   string `json:"-"`
	}
	tests := []struct {
		name, in, want string // want "" = accepted
	}{
		{"empty is an empty object", ``, ""},
		{"spaces", " \n ", ""},
		{"all fields", `{"name": "x", "count": 2, "ratio": 0.5, "on": true, "tags": ["a"], "sizes": [1], "meta": {"k": "v"}, "inner": {"deep": ["d"]}, "Untagged": "u"}`, ""},
		{"trailing space", `{"name": "x"}` + "\n\t ", ""},
		{"unknown field", `{"name": "x", "zzz": 1}`, `unknown field "zzz"; the fields are Untagged, count, inner, meta, name, on, ratio, sizes, tags`},
		{"a tagged-out field is unknown", `{"Hidden": "h"}`, `unknown field "Hidden"; the fields are Untagged, count, inner, meta, name, on, ratio, sizes, tags`},
		{"string", `{"name": 5}`, "name must be a string, not a JSON number"},
		{"whole number", `{"count": 2.5}`, "count must be a whole number, not a JSON number 2.5"},
		{"whole number from a string", `{"count": "2"}`, "count must be a whole number, not a JSON string"},
		{"number", `{"ratio": "half"}`, "ratio must be a number, not a JSON string"},
		{"boolean", `{"on": "yes"}`, "on must be true or false, not a JSON string"},
		{"list", `{"tags": "a"}`, "tags must be a list of strings, not a JSON string"},
		{"list item", `{"tags": ["a", 1]}`, "tags must be a list of strings; an item is a JSON number"},
		{"number list item", `{"sizes": ["1"]}`, "sizes must be a list of whole numbers; an item is a JSON string"},
		{"object", `{"meta": []}`, "meta must be an object, not a JSON array"},
		{"nested list item", `{"inner": {"deep": [true]}}`, "inner.deep must be a list of strings; an item is a JSON bool"},
		{"not an object", `[1]`, "arguments must be a JSON object, not a JSON array"},
		{"not json", `{"name": `, "arguments are not a valid object: unexpected EOF"},
		{"two objects", `{} {}`, "arguments are not a valid object: extra data after the JSON value"},
		{"junk after", `{"name": "x"}}`, "arguments are not a valid object: extra data after the JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a args
			err := Decode(json.RawMessage(tc.in), &a)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Decode(%s) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	var empty struct{}
	if err := Decode(json.RawMessage(`{"x": 1}`), &empty); err == nil || err.Error() != `unknown field "x"; pass {}` {
		t.Errorf("Decode into no fields = %v", err)
	}
}

func TestDecoded(t *testing.T) {
	type args struct {
		Name *string `json:"name"`
	}
	var got *string
	run := Decoded("greet", `{"name": "..."}`, func(_ context.Context, call Call, a args) (string, error) {
		got = a.Name
		return "hello " + *a.Name + " from " + string(call.SessionID), nil
	})
	out, err := run(context.Background(), Call{SessionID: "s1", Arguments: json.RawMessage(`{"name": "Ada"}`)})
	if err != nil || out != "hello Ada from s1" {
		t.Fatalf("run = %q, %v", out, err)
	}
	got = nil
	_, err = run(context.Background(), Call{Arguments: json.RawMessage(`{"name": 5}`)})
	if want := `greet: name must be a string, not a JSON number; pass {"name": "..."}`; err == nil || err.Error() != want {
		t.Errorf("run with a bad argument = %v, want %s", err, want)
	}
	if got != nil {
		t.Error("run saw arguments Decode refused")
	}
}
