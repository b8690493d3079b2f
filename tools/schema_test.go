package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSchemaCompileRefusesWhatItCannotCheck(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}`, `keyword "pattern" is not supported`},
		{`{"oneOf": []}`, `keyword "oneOf"`},
		{`{"type": "text"}`, `unknown type "text"`},
		{`{"type": 12}`, "type must be"},
		{`{"required": "a"}`, "required must be a list"},
		{`{"enum": []}`, "enum must be a non-empty list"},
		{`{"minLength": -1}`, "minLength must be a whole number"},
		{`[]`, "a schema must be an object"},
	}
	for _, tc := range cases {
		if _, err := compileSchema(json.RawMessage(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("compile %s = %v, want an error saying %q", tc.schema, err, tc.want)
		}
	}
	if _, err := compileSchema(json.RawMessage(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "t", "description": "d", "type": "object"}`)); err != nil {
		t.Errorf("annotations refused: %v", err)
	}
}

func TestSchemaValidate(t *testing.T) {
	s, err := compileSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"n": {"type": "integer", "minimum": 1, "maximum": 10},
			"x": {"type": "number"},
			"name": {"type": "string", "minLength": 2, "maxLength": 4},
			"maybe": {"type": ["string", "null"]},
			"list": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"enum": ["a", "b"]}},
			"meta": {"type": "object", "additionalProperties": {"type": "boolean"}}
		},
		"required": ["n"],
		"additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args string
		want string // "" = valid
	}{
		{`{"n": 3}`, ""},
		{`{"n": 3, "x": 1.5, "name": "abc", "maybe": null, "list": ["a"], "meta": {"k": true}}`, ""},
		{`{"n": 2.5}`, "at /n: got number, want integer"},
		{`{"n": 0}`, "at /n: must be at least 1"},
		{`{"n": 11}`, "at /n: must be at most 10"},
		{`{}`, "at /: missing property 'n'"},
		{`{"n": 1, "zzz": 1}`, "at /: property 'zzz' is not allowed"},
		{`{"n": 1, "name": "a"}`, "at /name: at least 2 characters"},
		{`{"n": 1, "name": "ééééé"}`, "at /name: at most 4 characters"},
		{`{"n": 1, "maybe": 3}`, "at /maybe: got integer, want string or null"},
		{`{"n": 1, "list": []}`, "at /list: at least 1 items"},
		{`{"n": 1, "list": ["a", "c"]}`, `at /list/1: value must be one of ["a","b"]`},
		{`{"n": 1, "meta": {"k": "yes"}}`, "at /meta/k: got string, want boolean"},
	}
	for _, tc := range cases {
		v, err := readValue(json.RawMessage(tc.args))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(s.validate(v, ""), "; ")
		if got != tc.want {
			t.Errorf("validate %s = %q, want %q", tc.args, got, tc.want)
		}
	}
	if _, err := readValue(json.RawMessage(`{} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}

func TestCheckSchema(t *testing.T) {
	if err := CheckSchema(json.RawMessage(`{"type": "object", "properties": {"q": {"type": "string"}}}`)); err != nil {
		t.Errorf("a schema in the subset: %v", err)
	}
	if err := CheckSchema(json.RawMessage(`{"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}]}}}`)); err == nil || !strings.Contains(err.Error(), "anyOf") {
		t.Errorf("a schema outside the subset: %v, want an error naming anyOf", err)
	}
}
