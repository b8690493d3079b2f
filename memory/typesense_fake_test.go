package memory

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeTypesense speaks the part of Typesense's REST API the index uses, so
// the official client (typesense-go) parses real bytes: collections (list, get,
// create, drop), document upsert, import (JSONL) and delete, and search with
// q, query_by, filter_by, sort_by, per_page and include_fields. Anything
// outside that contract is a 400, which fails the test that sent it.
type fakeTypesense struct {
	t   testing.TB
	key string

	mu          sync.Mutex
	mode        string // "", "503", "drop", "echo" (503 quoting the request headers)
	collections map[string]*fakeCollection
	searches    []url.Values
	log         []string // "METHOD path"
	onUpsert    func(id string)
	reject      string // upserts of a document with this content get a 400
}

type fakeCollection struct {
	schema map[string]any
	fields map[string]fakeField
	docs   map[string]map[string]any
}

type fakeField struct {
	typ      string
	optional bool
	facet    bool
}

func newFakeTypesense(t testing.TB, key string) (*fakeTypesense, *httptest.Server) {
	f := &fakeTypesense{t: t, key: key, collections: map[string]*fakeCollection{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeTypesense) setMode(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
}

func (f *fakeTypesense) lastSearch() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.searches) == 0 {
		return nil
	}
	return f.searches[len(f.searches)-1]
}

func (f *fakeTypesense) doc(coll, id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.collections[coll]; c != nil {
		return c.docs[id]
	}
	return nil
}

func (f *fakeTypesense) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func message(w http.ResponseWriter, status int, msg string) {
	reply(w, status, map[string]string{"message": msg})
}

func (f *fakeTypesense) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.log = append(f.log, r.Method+" "+r.URL.Path)
	mode := f.mode
	f.mu.Unlock()
	switch mode {
	case "503":
		message(w, http.StatusServiceUnavailable, "Not Ready or Lagging")
		return
	case "echo": // a misbehaving proxy that quotes the request back
		message(w, http.StatusServiceUnavailable, fmt.Sprintf("upstream down; request headers: %v", r.Header))
		return
	case "drop":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if r.Header.Get("X-TYPESENSE-API-KEY") != f.key {
		message(w, http.StatusUnauthorized, "Forbidden - a valid `x-typesense-api-key` header must be sent.")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if parts[0] != "collections" {
		message(w, http.StatusNotFound, "Not Found")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		list := []map[string]any{}
		for _, c := range f.collections {
			list = append(list, c.schema)
		}
		reply(w, http.StatusOK, list)
	case len(parts) == 1 && r.Method == http.MethodPost:
		f.createCollection(w, r)
	case len(parts) == 2 && r.Method == http.MethodGet:
		if c := f.collections[parts[1]]; c != nil {
			reply(w, http.StatusOK, c.schema)
		} else {
			message(w, http.StatusNotFound, "Not Found")
		}
	case len(parts) == 2 && r.Method == http.MethodDelete:
		if c := f.collections[parts[1]]; c != nil {
			delete(f.collections, parts[1])
			reply(w, http.StatusOK, c.schema)
		} else {
			message(w, http.StatusNotFound, "Not Found")
		}
	case len(parts) >= 3 && parts[2] == "documents":
		c := f.collections[parts[1]]
		if c == nil {
			message(w, http.StatusNotFound, "Not found.")
			return
		}
		switch {
		case len(parts) == 3 && r.Method == http.MethodPost:
			f.upsert(w, r, c)
		case len(parts) == 4 && parts[3] == "import" && r.Method == http.MethodPost:
			f.importDocs(w, r, c)
		case len(parts) == 4 && parts[3] == "search" && r.Method == http.MethodGet:
			f.search(w, r, parts[1], c)
		case len(parts) == 4 && r.Method == http.MethodDelete:
			if d, ok := c.docs[parts[3]]; ok {
				delete(c.docs, parts[3])
				reply(w, http.StatusOK, d)
			} else {
				message(w, http.StatusNotFound, "Could not find a document with id: "+parts[3])
			}
		default:
			message(w, http.StatusBadRequest, "unsupported by the fake: "+r.Method+" "+r.URL.Path)
		}
	default:
		message(w, http.StatusBadRequest, "unsupported by the fake: "+r.Method+" "+r.URL.Path)
	}
}

func (f *fakeTypesense) createCollection(w http.ResponseWriter, r *http.Request) {
	var schema struct {
		Name   string `json:"name"`
		Fields []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Facet    bool   `json:"facet"`
			Optional bool   `json:"optional"`
		} `json:"fields"`
		DefaultSortingField string `json:"default_sorting_field"`
	}
	var raw map[string]any
	body := json.NewDecoder(r.Body)
	if err := body.Decode(&raw); err != nil {
		message(w, http.StatusBadRequest, "Bad JSON.")
		return
	}
	b, _ := json.Marshal(raw)
	_ = json.Unmarshal(b, &schema)
	if schema.Name == "" || len(schema.Fields) == 0 {
		message(w, http.StatusBadRequest, "Parameter `name` and `fields` are required.")
		return
	}
	if f.collections[schema.Name] != nil {
		message(w, http.StatusConflict, "A collection with name `"+schema.Name+"` already exists.")
		return
	}
	c := &fakeCollection{schema: raw, fields: map[string]fakeField{}, docs: map[string]map[string]any{}}
	for _, fl := range schema.Fields {
		c.fields[fl.Name] = fakeField{typ: fl.Type, optional: fl.Optional, facet: fl.Facet}
	}
	if d, ok := c.fields[schema.DefaultSortingField]; schema.DefaultSortingField != "" && (!ok || d.typ != "int64") {
		message(w, http.StatusBadRequest, "Default sorting field must be a numerical field.")
		return
	}
	raw["created_at"] = 1700000000
	raw["num_documents"] = 0
	f.collections[schema.Name] = c
	reply(w, http.StatusCreated, raw)
}

// validate checks a document against the collection's fields the way
// Typesense does for the types the index uses.
func (c *fakeCollection) validate(doc map[string]any) string {
	if id, ok := doc["id"].(string); !ok || id == "" {
		return "Document's `id` field should be a string."
	}
	for name, fl := range c.fields {
		v, ok := doc[name]
		if !ok {
			if fl.optional {
				continue
			}
			return "Field `" + name + "` has been declared in the schema, but is not found in the document."
		}
		switch fl.typ {
		case "string":
			_, ok = v.(string)
		case "string[]":
			var arr []any
			if arr, ok = v.([]any); ok {
				for _, e := range arr {
					if _, s := e.(string); !s {
						ok = false
					}
				}
			}
		case "int64":
			n, isNum := v.(float64)
			ok = isNum && n == float64(int64(n))
		}
		if !ok {
			return "Field `" + name + "` must be " + fl.typ + "."
		}
	}
	return ""
}

func (f *fakeTypesense) upsert(w http.ResponseWriter, r *http.Request, c *fakeCollection) {
	if r.URL.Query().Get("action") != "upsert" {
		message(w, http.StatusBadRequest, "the index must upsert (action=upsert)")
		return
	}
	var doc map[string]any
	if err := json.NewDecoder(r.Body).Decode(&doc); err != nil {
		message(w, http.StatusBadRequest, "Bad JSON.")
		return
	}
	if msg := c.validate(doc); msg != "" {
		message(w, http.StatusBadRequest, msg)
		return
	}
	if f.reject != "" && doc["content"] == f.reject {
		message(w, http.StatusBadRequest, "Field `content` is refused by the test.")
		return
	}
	id := doc["id"].(string)
	c.docs[id] = doc
	if f.onUpsert != nil {
		hook := f.onUpsert
		f.mu.Unlock()
		hook(id)
		f.mu.Lock()
	}
	reply(w, http.StatusCreated, doc)
}

func (f *fakeTypesense) importDocs(w http.ResponseWriter, r *http.Request, c *fakeCollection) {
	if r.URL.Query().Get("action") != "upsert" {
		message(w, http.StatusBadRequest, "the index must import with action=upsert")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var out strings.Builder
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		var doc map[string]any
		res := map[string]any{"success": true}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			res = map[string]any{"success": false, "error": "Bad JSON.", "document": line}
		} else if msg := c.validate(doc); msg != "" {
			res = map[string]any{"success": false, "error": msg, "document": line}
		} else {
			c.docs[doc["id"].(string)] = doc
		}
		b, _ := json.Marshal(res)
		out.Write(b)
		out.WriteByte('\n')
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(strings.TrimSuffix(out.String(), "\n")))
}

var fakeFilter = regexp.MustCompile("^([a-z_]+):=`([^`]*)`$")

func (f *fakeTypesense) search(w http.ResponseWriter, r *http.Request, name string, c *fakeCollection) {
	p := r.URL.Query()
	f.searches = append(f.searches, p)
	if p.Get("q") == "" || p.Get("query_by") == "" {
		message(w, http.StatusBadRequest, "Parameter `q` and `query_by` are required.")
		return
	}
	var filterField, filterValue string
	if fb := p.Get("filter_by"); fb != "" {
		m := fakeFilter.FindStringSubmatch(fb)
		if m == nil {
			message(w, http.StatusBadRequest, "Could not parse the filter query.")
			return
		}
		if _, ok := c.fields[m[1]]; !ok {
			message(w, http.StatusNotFound, "Could not find a filter field named `"+m[1]+"` in the schema.")
			return
		}
		filterField, filterValue = m[1], m[2]
	}
	if sb := p.Get("sort_by"); sb != "" && sb != "_text_match:desc,created_at:desc" {
		message(w, http.StatusBadRequest, "the fake sorts only by _text_match:desc,created_at:desc, got "+sb)
		return
	}
	perPage := 10
	if pp := p.Get("per_page"); pp != "" {
		n, err := strconv.Atoi(pp)
		if err != nil || n < 1 || n > 250 {
			message(w, http.StatusBadRequest, "Parameter `per_page` must be an integer between 1 and 250.")
			return
		}
		perPage = n
	}
	queryBy := strings.Split(p.Get("query_by"), ",")
	words := strings.Fields(strings.ToLower(p.Get("q")))
	type hit struct {
		doc   map[string]any
		score int64
	}
	var hits []hit
	for _, d := range c.docs {
		if filterField != "" && d[filterField] != filterValue {
			continue
		}
		var text strings.Builder
		for _, fld := range queryBy {
			switch v := d[fld].(type) {
			case string:
				text.WriteString(v + " ")
			case []any:
				for _, e := range v {
					text.WriteString(fmt.Sprint(e) + " ")
				}
			}
		}
		tokens := map[string]int{}
		for _, tok := range strings.FieldsFunc(strings.ToLower(text.String()), func(r rune) bool { return !isWordRune(r) }) {
			tokens[tok]++
		}
		var matched, freq int64
		for _, wd := range words {
			if n := tokens[wd]; n > 0 {
				matched++
				freq += int64(n)
			}
		}
		if matched > 0 {
			hits = append(hits, hit{doc: d, score: matched<<32 | freq})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].doc["created_at"].(float64) > hits[j].doc["created_at"].(float64)
	})
	found := len(hits)
	hits = hits[:min(len(hits), perPage)]
	include := map[string]bool{}
	if inc := p.Get("include_fields"); inc != "" {
		for _, fld := range strings.Split(inc, ",") {
			include[fld] = true
		}
	}
	out := []map[string]any{}
	for _, h := range hits {
		doc := map[string]any{}
		for k, v := range h.doc {
			if len(include) == 0 || include[k] {
				doc[k] = v
			}
		}
		out = append(out, map[string]any{"document": doc, "highlights": []any{}, "text_match": h.score})
	}
	reply(w, http.StatusOK, map[string]any{
		"found": found, "hits": out, "out_of": len(c.docs), "page": 1, "search_time_ms": 0,
		"request_params": map[string]any{"collection_name": name, "per_page": perPage, "q": p.Get("q")},
	})
}
