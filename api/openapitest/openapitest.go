// Package openapitest holds HTTP answers to the API's OpenAPI document
// (api/openapi.yaml) in tests: a server that validates every response it
// gives, and one that validates the reply callbacks it receives. Only
// tests import it, so kin-openapi stays out of the parley binary.
package openapitest

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
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/parleyd/parley/api"
)

// Doc is the OpenAPI document, loaded and validated once.
var Doc = sync.OnceValues(func() (*openapi3.T, error) {
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

// DocPath is the document's method and path of a ServeMux pattern:
// {key...} matches the rest of the path, which OpenAPI writes {key}.
func DocPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	return method, strings.ReplaceAll(path, "...}", "}")
}

// routeMux finds the route a request reaches: the API's route table, and
// the document's paths beside /v1 (the webhooks).
var routeMux = sync.OnceValue(func() *http.ServeMux {
	mux := http.NewServeMux()
	for _, p := range api.Patterns() {
		mux.Handle(p, http.NotFoundHandler())
	}
	if doc, err := Doc(); err == nil {
		for path, item := range doc.Paths.Map() {
			if strings.HasPrefix(path, "/v1/") {
				continue
			}
			for method := range item.Operations() {
				mux.Handle(method+" "+path, http.NotFoundHandler())
			}
		}
	}
	return mux
})

// Pattern is the route pattern r reaches, "" for none.
func Pattern(r *http.Request) string {
	_, p := routeMux().Handler(r)
	return p
}

// Server serves h, checking every response it gives against the
// document: its status is one the operation documents, its body (each
// SSE event of a stream) fits the schema, and an answer to a request no
// route takes is the error shape. Mismatches fail t when the server has
// closed (at t's cleanup at the latest).
func Server(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	doc, err := Doc()
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

// ServeChecked answers req with h in process and checks the response
// against the document.
func ServeChecked(t testing.TB, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	doc, err := Doc()
	if err != nil {
		t.Fatal(err)
	}
	pattern := Pattern(req)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if err := ValidateResponse(doc, req, pattern, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Errorf("%s %s: response doesn't fit openapi.yaml: %d: %s (body %.300q)", req.Method, req.URL, rec.Code, Brief(err), rec.Body.Bytes())
	}
	return rec
}

type validating struct {
	doc *openapi3.T
	h   http.Handler

	mu   sync.Mutex
	errs []string
}

func (v *validating) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, target := r.Method, r.URL.RequestURI()
	pattern := Pattern(r)
	// The body is kept as the handler reads it, on a copy of r: reading
	// it first would change what a refusal before the body is, and the
	// server looks at the original's body to know what is left of it.
	var reqBody *teeReader
	if r.Body != nil && r.Header.Get("Content-Type") == "application/json" {
		reqBody = &teeReader{ReadCloser: r.Body}
		r = r.WithContext(r.Context())
		r.Body = reqBody
	}
	tw := &teeWriter{ResponseWriter: w}
	v.h.ServeHTTP(tw, r)
	status := tw.status
	if status == 0 {
		status = http.StatusOK
	}
	err := ValidateResponse(v.doc, r, pattern, status, w.Header().Clone(), tw.body.Bytes())
	if err == nil && status < 300 && reqBody != nil {
		// What the API took, the document must allow.
		if err = ValidateAccepted(v.doc, r, pattern, reqBody.buf.Bytes()); err != nil {
			err = fmt.Errorf("the API took a request the document refuses: %w", err)
		}
	}
	if err != nil {
		v.mu.Lock()
		v.errs = append(v.errs, fmt.Sprintf("%s %s: %d: %s (body %.300q)", method, target, status, Brief(err), tw.body.Bytes()))
		v.mu.Unlock()
	}
}

// ValidateAccepted checks a JSON request the API took (answered with a
// 2xx) against the operation's request body and parameters.
func ValidateAccepted(doc *openapi3.T, r *http.Request, pattern string, body []byte) error {
	if pattern == "" {
		return nil
	}
	method, path := DocPath(pattern)
	item := doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		return fmt.Errorf("the route %q is not in the document", pattern)
	}
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	return openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams(path, r.URL.Path),
		Route:      &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)},
		Options:    &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// pathParams reads a request path's values for a document path's
// {params}; the last takes the rest of the path, as {key...} does.
func pathParams(docPath, reqPath string) map[string]string {
	names := strings.Split(strings.Trim(docPath, "/"), "/")
	values := strings.SplitN(strings.Trim(reqPath, "/"), "/", len(names))
	out := map[string]string{}
	for i, n := range names {
		if i < len(values) && strings.HasPrefix(n, "{") {
			out[strings.Trim(n, "{}")] = values[i]
		}
	}
	return out
}

// ValidateResponse checks one response to r, which reached the route
// pattern ("" for none), against the document.
func ValidateResponse(doc *openapi3.T, r *http.Request, pattern string, status int, header http.Header, body []byte) error {
	if pattern == "" {
		// No route takes it: the catch-all's 404, or the 401 before it.
		if status != http.StatusNotFound && status != http.StatusUnauthorized {
			return fmt.Errorf("a request no route takes got %d", status)
		}
		return ValidateSchema(doc, "Error", body)
	}
	method, path := DocPath(pattern)
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
				if err := ValidateSchema(doc, "Event", []byte(data)); err != nil {
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

// ValidateSchema checks a JSON value against one of the document's schemas.
func ValidateSchema(doc *openapi3.T, name string, body []byte) error {
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

// HookServer serves h as a session's webhook_url, checking every reply
// callback it receives against the document's reply webhook (headers and
// payload).
func HookServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	doc, err := Doc()
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
		if err := ValidateCallback(doc, r, body); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("%s (body %.300q)", Brief(err), body))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// ValidateCallback checks a reply callback parley POSTed against the
// document's reply webhook.
func ValidateCallback(doc *openapi3.T, r *http.Request, body []byte) error {
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

// Brief is a validation error without the schemas kin-openapi prints in
// full after each reason.
func Brief(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if t := strings.TrimSpace(line); t == "Schema:" || t == "Value:" {
			break
		}
		out = append(out, line)
	}
	return strings.Join(out, " ")
}

// teeReader keeps a copy of what is read through it.
type teeReader struct {
	io.ReadCloser
	buf bytes.Buffer
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf.Write(p[:n])
	return n, err
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
