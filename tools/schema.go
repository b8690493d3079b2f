package tools

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// schema is the subset of JSON Schema that tool arguments use. It is
// compiled once at Register; a keyword outside the subset is refused there,
// so nothing a schema says is silently left unchecked. (A full JSON Schema
// library compiled every draft's metaschema at start-up, which cost more
// start-up time than parley's whole start otherwise.)
type schema struct {
	types                []string
	properties           map[string]*schema
	required             []string
	additionalProperties *schema // checks extra properties, when set
	noExtra              bool    // additionalProperties: false
	items                *schema
	enum                 []any
	minimum, maximum     *float64
	minLength, maxLength *int
	minItems, maxItems   *int
}

// annotations are keywords that describe but do not constrain.
var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true,
	"default": true, "examples": true, "$comment": true}

var knownTypes = map[string]bool{"object": true, "array": true, "string": true, "integer": true,
	"number": true, "boolean": true, "null": true}

const supportedKeywords = "type, properties, required, additionalProperties, items, enum, minimum, maximum, minLength, maxLength, minItems, maxItems"

func compileSchema(raw json.RawMessage) (*schema, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return compileNode(doc, "")
}

func compileNode(doc any, at string) (*schema, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("at %s: a schema must be an object", orRoot(at))
	}
	s := &schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		var err error
		switch k {
		case "type":
			err = s.setType(v)
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("at %s: properties must be an object", orRoot(at))
			}
			s.properties = map[string]*schema{}
			for name, p := range props {
				if s.properties[name], err = compileNode(p, at+"/properties/"+name); err != nil {
					return nil, err
				}
			}
		case "required":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("at %s: required must be a list of names", orRoot(at))
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return nil, fmt.Errorf("at %s: required must be a list of names", orRoot(at))
				}
				s.required = append(s.required, name)
			}
		case "additionalProperties":
			switch ap := v.(type) {
			case bool:
				s.noExtra = !ap
			default:
				s.additionalProperties, err = compileNode(ap, at+"/additionalProperties")
			}
		case "items":
			s.items, err = compileNode(v, at+"/items")
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, fmt.Errorf("at %s: enum must be a non-empty list", orRoot(at))
			}
			s.enum = list
		case "minimum", "maximum":
			f, ok := v.(float64)
			if !ok {
				return nil, fmt.Errorf("at %s: %s must be a number", orRoot(at), k)
			}
			if k == "minimum" {
				s.minimum = &f
			} else {
				s.maximum = &f
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			f, ok := v.(float64)
			if !ok || f < 0 || f != math.Trunc(f) {
				return nil, fmt.Errorf("at %s: %s must be a whole number", orRoot(at), k)
			}
			n := int(f)
			switch k {
			case "minLength":
				s.minLength = &n
			case "maxLength":
				s.maxLength = &n
			case "minItems":
				s.minItems = &n
			case "maxItems":
				s.maxItems = &n
			}
		default:
			if !annotations[k] {
				return nil, fmt.Errorf("at %s: keyword %q is not supported for tool arguments; use %s", orRoot(at), k, supportedKeywords)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *schema) setType(v any) error {
	switch t := v.(type) {
	case string:
		s.types = []string{t}
	case []any:
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return fmt.Errorf("type must be a name or a list of names")
			}
			s.types = append(s.types, name)
		}
	default:
		return fmt.Errorf("type must be a name or a list of names, not %v", v)
	}
	for _, name := range s.types {
		if !knownTypes[name] {
			return fmt.Errorf("unknown type %q", name)
		}
	}
	return nil
}

func orRoot(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

// validate returns one message per problem with v, each naming where.
func (s *schema) validate(v any, at string) []string {
	if len(s.types) > 0 && !s.typeMatches(v) {
		return []string{fmt.Sprintf("at %s: got %s, want %s", orRoot(at), typeOf(v), strings.Join(s.types, " or "))}
	}
	var errs []string
	if s.enum != nil {
		found := false
		for _, e := range s.enum {
			if reflect.DeepEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			b, _ := json.Marshal(s.enum)
			errs = append(errs, fmt.Sprintf("at %s: value must be one of %s", orRoot(at), b))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := x[name]; !ok {
				errs = append(errs, fmt.Sprintf("at %s: missing property '%s'", orRoot(at), name))
			}
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if p, ok := s.properties[k]; ok {
				errs = append(errs, p.validate(x[k], at+"/"+k)...)
			} else if s.noExtra {
				errs = append(errs, fmt.Sprintf("at %s: property '%s' is not allowed", orRoot(at), k))
			} else if s.additionalProperties != nil {
				errs = append(errs, s.additionalProperties.validate(x[k], at+"/"+k)...)
			}
		}
	case []any:
		if s.minItems != nil && len(x) < *s.minItems {
			errs = append(errs, fmt.Sprintf("at %s: at least %d items", orRoot(at), *s.minItems))
		}
		if s.maxItems != nil && len(x) > *s.maxItems {
			errs = append(errs, fmt.Sprintf("at %s: at most %d items", orRoot(at), *s.maxItems))
		}
		if s.items != nil {
			for i, item := range x {
				errs = append(errs, s.items.validate(item, at+"/"+strconv.Itoa(i))...)
			}
		}
	case string:
		n := len([]rune(x))
		if s.minLength != nil && n < *s.minLength {
			errs = append(errs, fmt.Sprintf("at %s: at least %d characters", orRoot(at), *s.minLength))
		}
		if s.maxLength != nil && n > *s.maxLength {
			errs = append(errs, fmt.Sprintf("at %s: at most %d characters", orRoot(at), *s.maxLength))
		}
	case float64:
		if s.minimum != nil && x < *s.minimum {
			errs = append(errs, fmt.Sprintf("at %s: must be at least %v", orRoot(at), *s.minimum))
		}
		if s.maximum != nil && x > *s.maximum {
			errs = append(errs, fmt.Sprintf("at %s: must be at most %v", orRoot(at), *s.maximum))
		}
	}
	return errs
}

func (s *schema) typeMatches(v any) bool {
	for _, t := range s.types {
		switch t {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == math.Trunc(f) && !math.IsInf(f, 0) {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		}
	}
	return false
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}
