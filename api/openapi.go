package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

// OpenAPIPath is where the API serves its OpenAPI document, to anyone: it
// describes the routes and never a session's data.
const OpenAPIPath = "/v1/openapi.json"

//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML is the API's OpenAPI document as written (api/openapi.yaml).
func OpenAPIYAML() []byte { return openAPIYAML }

// openAPIJSON is the document converted to JSON, once, on first use.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("read openapi.yaml: %w", err)
	}
	return json.Marshal(jsonValue(doc))
})

// jsonValue makes what YAML decoded encodable as JSON: maps with keys
// that aren't strings get them as text.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonValue(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonValue(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonValue(e)
		}
		return v
	}
	return v
}

// openAPI is GET /v1/openapi.json.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) error {
	b, err := openAPIJSON()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}
