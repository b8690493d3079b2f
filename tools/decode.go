package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
)

// errExtraData is JSON followed by more than white space.
var errExtraData = errors.New("extra data after the JSON value")

// Decode reads a tool's arguments into v, a pointer to a struct with json
// tags, strictly: no arguments read as {}, and an unknown field, a value of
// the wrong type or anything after the object is an error that names the
// field and the JSON type it wants, in words the model can act on. Every
// tool reads its arguments through it, so all tools refuse alike.
func Decode(args json.RawMessage, v any) error {
	err := read(args, v, true)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return typeError(te, reflect.TypeOf(v))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		msg := "unknown field " + name
		if fields := fieldNames(reflect.TypeOf(v)); len(fields) > 0 {
			msg += "; the fields are " + strings.Join(fields, ", ")
		} else {
			msg += "; pass {}"
		}
		return errors.New(msg)
	}
	return fmt.Errorf("arguments are not a valid object: %v", err)
}

// read decodes one JSON value from args into v and refuses anything after
// it; strict refuses fields v does not have.
func read(args json.RawMessage, v any, strict bool) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errExtraData
	}
	return nil
}

// readValue parses arguments as a plain JSON value, for schema validation.
func readValue(args json.RawMessage) (any, error) {
	var v any
	if err := read(args, &v, false); err != nil {
		return nil, err
	}
	return v, nil
}

// typeError says which field has the wrong type and what it should be.
// Go reports an item of a list under the list's name with the item's type,
// so the field's declared type is looked up to tell the two apart.
func typeError(te *json.UnmarshalTypeError, root reflect.Type) error {
	if te.Field == "" {
		return fmt.Errorf("arguments must be a JSON object, not a JSON %s", te.Value)
	}
	if ft := fieldType(root, te.Field); ft != nil && isList(ft) && deref(ft.Elem()) == deref(te.Type) {
		return fmt.Errorf("%s must be %s; an item is a JSON %s", te.Field, jsonType(ft), te.Value)
	}
	return fmt.Errorf("%s must be %s, not a JSON %s", te.Field, jsonType(te.Type), te.Value)
}

// jsonType names the JSON a Go type reads, with its article.
func jsonType(t reflect.Type) string {
	one, _ := jsonNames(t)
	if isList(t) {
		if _, items := jsonNames(deref(t).Elem()); items != "" {
			return one + " of " + items
		}
	}
	return one
}

// jsonNames names the JSON a Go type reads: one, with its article, and
// many ("" when it may be anything).
func jsonNames(t reflect.Type) (one, many string) {
	switch deref(t).Kind() {
	case reflect.String:
		return "a string", "strings"
	case reflect.Bool:
		return "true or false", "true or false values"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number", "whole numbers"
	case reflect.Float32, reflect.Float64:
		return "a number", "numbers"
	case reflect.Slice, reflect.Array:
		return "a list", "lists"
	case reflect.Map, reflect.Struct:
		return "an object", "objects"
	}
	return "a JSON value", ""
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func isList(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
}

// fieldType finds the declared type of a dotted JSON field path in t, or
// nil.
func fieldType(t reflect.Type, path string) reflect.Type {
	for name := range strings.SplitSeq(path, ".") {
		t = deref(t)
		for t != nil && isList(t) {
			t = deref(t.Elem())
		}
		if t == nil || t.Kind() != reflect.Struct {
			return nil
		}
		f, ok := jsonField(t, name)
		if !ok {
			return nil
		}
		t = f.Type
	}
	return t
}

// jsonField is the field of struct t that JSON name reads into.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if n, ok := jsonName(f); ok && n == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldNames lists the JSON names of the struct v points to, sorted.
func fieldNames(t reflect.Type) []string {
	t = deref(t)
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for f := range t.Fields() {
		if n, ok := jsonName(f); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}
