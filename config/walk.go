package config

import (
	"fmt"
	"reflect"

	"github.com/parleyd/parley/config/section"
)

// walkDefaults calls SetDefaults on v when it is a section.Defaulter, then
// on every section within it: the fields the file has keys for, and the
// entries of lists. path is v's key, such as "agents[0].compaction"; has
// reports whether the file gave a key, by its full path. A map-typed
// section (providers) defaults its own entries.
func walkDefaults(v reflect.Value, path string, has func(key string) bool) {
	if v.CanAddr() {
		if d, ok := v.Addr().Interface().(section.Defaulter); ok {
			d.SetDefaults(section.NewSet(path, has))
		}
	}
	walkInner(v, path, func(v reflect.Value, path string) { walkDefaults(v, path, has) })
}

// walkChecks calls Check on v when it is a section.Checker, then on every
// section within it, as walkDefaults does, with its problems' keys below
// path.
func walkChecks(v reflect.Value, path string, r section.Reporter) {
	if v.CanAddr() {
		if c, ok := v.Addr().Interface().(section.Checker); ok {
			c.Check(section.Prefixed(r, path))
		}
	}
	walkInner(v, path, func(v reflect.Value, path string) { walkChecks(v, path, r) })
}

// walkInner calls fn on each field with a key of a struct, and each entry
// of a list.
func walkInner(v reflect.Value, path string, fn func(v reflect.Value, path string)) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if name := keyName(t.Field(i)); name != "" {
				fn(v.Field(i), section.Join(path, name))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			fn(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// reporter is the checker as a section.Reporter.
type reporter struct{ ck *checker }

func (r reporter) Add(key, msg string) { r.ck.add(key, msg) }
