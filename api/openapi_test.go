package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/webhooks"
)

// The OpenAPI document, loaded and checked once for the package's tests.
var openAPIDoc = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPIYAML())
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	return doc, nil
})

func init() {
	// The event stream's body is checked event by event (checkEvents);
	// kin-openapi only needs to read it as text.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
}

// docPath is the document's path of a ServeMux pattern's: {key...}
// matches the rest of the path, which OpenAPI writes {key}.
func docPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return method, strings.ReplaceAll(path, "...}", "}")
}

// routeMux finds which of the API's routes a request reaches.
var routeMux = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range api.Patterns() {
		mux.Handle(p, http.NotFoundHandler())
	}
	return mux
})

// newAPIServer serves h, an API handler, checking every response it gives
// against the OpenAPI document: its status is one the operation documents,
// its body (each SSE event of a stream) fits the schema, and an answer to
// a request no route takes is the error shape. Every api test serves the
// API through it, so every response they receive is checked.
func newAPIServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	v := &validating{doc: doc, h: h}
	// Registered before srv.Close, so it runs after it: Close waits for
	// every handler, so every response has been checked by then.
	t.Cleanup(func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, e := range v.errs {
			t.Errorf("response doesn't fit openapi.yaml: %s", e)
		}
	})
	srv := httptest.NewServer(v)
	t.Cleanup(srv.Close)
	return srv
}

type validating struct {
	doc *openapi3.T
	h   http.Handler

	mu      sync.Mutex
	errs    []string
	checked int
}

func (v *validating) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, target := r.Method, r.URL.RequestURI()
	_, pattern := routeMux().Handler(r)
	tw := &teeWriter{ResponseWriter: w}
	v.h.ServeHTTP(tw, r)
	status := tw.status
	if status == 0 {
		status = http.StatusOK
	}
	err := validateResponse(v.doc, r, pattern, status, w.Header().Clone(), tw.body.Bytes())
	v.mu.Lock()
	defer v.mu.Unlock()
	v.checked++
	if err != nil {
		v.errs = append(v.errs, fmt.Sprintf("%s %s: %d: %s (body %.300q)", method, target, status, brief(err), tw.body.Bytes()))
	}
}

func validateResponse(doc *openapi3.T, r *http.Request, pattern string, status int, header http.Header, body []byte) error {
	if pattern == "" {
		// No route takes it: the catch-all's 404, or the 401 before it.
		if status != http.StatusNotFound && status != http.StatusUnauthorized {
			return fmt.Errorf("a request no route takes got %d", status)
		}
		return validateSchema(doc, "Error", body)
	}
	method, path := docPath(pattern)
	item := doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		return fmt.Errorf("the route %q is not in the document", pattern)
	}
	mt, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	if mt != "application/json" && mt != "text/event-stream" {
		opts.ExcludeResponseBody = true // a file's own bytes
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r,
			Route:   &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)},
		},
		Status:  status,
		Header:  header,
		Options: opts,
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(r.Context(), in); err != nil {
		return err
	}
	if mt == "text/event-stream" && status == http.StatusOK {
		return checkEvents(doc, body)
	}
	return nil
}

// checkEvents checks each whole event of an SSE body against the Event
// schema, and that its id and event lines agree with it.
func checkEvents(doc *openapi3.T, body []byte) error {
	var id, typ, data string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				if err := validateSchema(doc, "Event", []byte(data)); err != nil {
					return fmt.Errorf("event %s: %w", data, err)
				}
				var e struct{ ID, Type string }
				_ = json.Unmarshal([]byte(data), &e)
				if e.ID != id || e.Type != typ {
					return fmt.Errorf("event lines id %q event %q disagree with its data %s", id, typ, data)
				}
			}
			id, typ, data = "", "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	return sc.Err()
}

// validateSchema checks a JSON value against one of the document's schemas.
func validateSchema(doc *openapi3.T, name string, body []byte) error {
	ref := doc.Components.Schemas[name]
	if ref == nil {
		return fmt.Errorf("no schema %s", name)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
}

// brief is a validation error without the schemas kin-openapi prints in
// full after each reason.
func brief(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if t := strings.TrimSpace(line); t == "Schema:" || t == "Value:" {
			break
		}
		out = append(out, line)
	}
	return strings.Join(out, " ")
}

// teeWriter passes a response on and keeps a copy of it.
type teeWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveChecked answers req with h in process and checks the response
// against the document.
func serveChecked(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	_, pattern := routeMux().Handler(req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if err := validateResponse(doc, req, pattern, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Errorf("%s %s: response doesn't fit openapi.yaml: %d: %s (body %.300q)", req.Method, req.URL, rec.Code, brief(err), rec.Body.Bytes())
	}
	return rec
}

// TestOpenAPIRoutes walks the router: every route of the API is in the
// document, and the document has no route the API lacks (beyond the
// webhooks, served beside /v1).
func TestOpenAPIRoutes(t *testing.T) {
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("the document is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	var documented, served []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	for _, p := range api.Patterns() {
		method, path := docPath(p)
		served = append(served, method+" "+path)
	}
	served = append(served, "POST "+webhooks.Pattern)
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.yaml", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.yaml documents %s, which no handler serves", r)
		}
	}
	if doc.Webhooks == nil || doc.Webhooks["reply"] == nil || doc.Webhooks["reply"].Post == nil {
		t.Error("openapi.yaml has no reply callback under webhooks")
	}
	for _, name := range []string{"Error", "ErrorCode", "Event", "CallbackPayload"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("openapi.yaml has no %s schema", name)
		}
	}
}

// TestOpenAPIServed: GET /v1/openapi.json needs no token and is the
// document, as JSON.
func TestOpenAPIServed(t *testing.T) {
	srv := newAPIServer(t, api.New(api.Options{Tokens: []string{token}}))
	res, err := http.Get(srv.URL + api.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s without a token: %d %s", api.OpenAPIPath, res.StatusCode, res.Header.Get("Content-Type"))
	}
	served, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("the served document doesn't load: %v", err)
	}
	want, _ := openAPIDoc()
	sj, _ := json.Marshal(served)
	wj, _ := json.Marshal(want)
	if !bytes.Equal(sj, wj) {
		t.Error("the served document differs from openapi.yaml")
	}
	// The rest of /v1 still needs the token.
	res2, err := http.Get(srv.URL + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sessions without a token: %d, want 401", res2.StatusCode)
	}
}

// TestResponseValidationFails: the check every api test's responses pass
// through refuses what the document doesn't allow.
func TestResponseValidationFails(t *testing.T) {
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	sseHeader := http.Header{"Content-Type": {"text/event-stream"}}
	goodEvent := `{"id":"r:0","type":"message.delta","ts":"2026-01-01T00:00:00Z","session_id":"s","run_id":"r","data":{"text":"hi"}}`
	for _, tc := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a page of sessions", "GET", "/v1/sessions", 200, jsonHeader, `{"sessions":[]}`, true},
		{"sessions of the wrong type", "GET", "/v1/sessions", 200, jsonHeader, `{"sessions":5}`, false},
		{"an undocumented status", "GET", "/v1/sessions", 418, jsonHeader, `{"error":{"code":"bad_request","message":"x"}}`, false},
		{"an error code outside the vocabulary", "GET", "/v1/sessions", 400, jsonHeader, `{"error":{"code":"invalid","message":"x"}}`, false},
		{"an error without a message", "GET", "/v1/sessions", 400, jsonHeader, `{"error":{"code":"bad_request"}}`, false},
		{"no route's 404", "GET", "/v1/nope", 404, jsonHeader, `{"error":{"code":"not_found","message":"no such route"}}`, true},
		{"no route's 404, not the error shape", "GET", "/v1/nope", 404, jsonHeader, `404 page not found`, false},
		{"an event", "GET", "/v1/sessions/s/events", 200, sseHeader, "id: r:0\nevent: message.delta\ndata: " + goodEvent + "\n\n", true},
		{"an event whose data lacks a field", "GET", "/v1/sessions/s/events", 200, sseHeader,
			"id: r:0\nevent: message.delta\ndata: " + strings.Replace(goodEvent, `"text":"hi"`, `"txt":"hi"`, 1) + "\n\n", false},
		{"an event of no known type", "GET", "/v1/sessions/s/events", 200, sseHeader,
			"id: r:0\nevent: nope\ndata: " + strings.Replace(goodEvent, "message.delta", "nope", 1) + "\n\n", false},
		{"event lines disagreeing with the data", "GET", "/v1/sessions/s/events", 200, sseHeader,
			"id: r:1\nevent: message.delta\ndata: " + goodEvent + "\n\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			_, pattern := routeMux().Handler(req)
			err := validateResponse(doc, req, pattern, tc.status, tc.header, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("validation error %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// newHookServer serves h as a session's webhook_url, checking every reply
// callback it receives against the document's reply webhook (headers and
// payload).
func newHookServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range errs {
			t.Errorf("reply callback doesn't fit openapi.yaml: %s", e)
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := validateCallback(doc, r, body); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("%s (body %.300q)", brief(err), body))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func validateCallback(doc *openapi3.T, r *http.Request, body []byte) error {
	item := doc.Webhooks["reply"]
	if item == nil || item.Post == nil {
		return fmt.Errorf("the document has no reply webhook")
	}
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	return openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   &routers.Route{Spec: doc, Path: r.URL.Path, PathItem: item, Method: http.MethodPost, Operation: item.Post},
		Options: &openapi3filter.Options{MultiError: true},
	})
}

// TestCallbackValidationFails: the check of the reply callbacks the tests
// receive refuses what the document doesn't allow.
func TestCallbackValidationFails(t *testing.T) {
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	good := `{"type":"reply","session_id":"s","message_id":"m","agent_id":"main","content":"hi","aborted":false,"at":"2026-01-01T00:00:00Z"}`
	sig := "sha256=" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, body, sig string
		ok              bool
	}{
		{"a reply", good, sig, true},
		{"no signature", good, "", false},
		{"a signature of the wrong form", good, "md5=00", false},
		{"a payload without its message id", strings.Replace(good, `"message_id":"m",`, "", 1), sig, false},
		{"a payload of another type", strings.Replace(good, `"type":"reply"`, `"type":"note"`, 1), sig, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/hook", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Parley-Timestamp", "1700000000")
			req.Header.Set("X-Parley-Delivery", "d1")
			if tc.sig != "" {
				req.Header.Set("X-Parley-Signature", tc.sig)
			}
			if err := validateCallback(doc, req, []byte(tc.body)); (err == nil) != tc.ok {
				t.Fatalf("validation error %v, want ok %v", err, tc.ok)
			}
		})
	}
}
