package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/parleyd/parley/api"
	"github.com/parleyd/parley/api/openapitest"
	"github.com/parleyd/parley/webhooks"
)

// The package's tests check what they receive with openapitest.
var (
	openAPIDoc       = openapitest.Doc
	newAPIServer     = openapitest.Server
	serveChecked     = openapitest.ServeChecked
	newHookServer    = openapitest.HookServer
	docPath          = openapitest.DocPath
	validateResponse = openapitest.ValidateResponse
	validateCallback = openapitest.ValidateCallback
)

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
			pattern := openapitest.Pattern(req)
			err := validateResponse(doc, req, pattern, tc.status, tc.header, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("validation error %v, want ok %v", err, tc.ok)
			}
		})
	}
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

// TestAcceptedRequestValidationFails: a request the API took must fit the
// document too, and the check says when it doesn't.
func TestAcceptedRequestValidationFails(t *testing.T) {
	doc, err := openAPIDoc()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		ok                       bool
	}{
		{"a session", "POST", "/v1/sessions", `{"title":"t","tools":[{"name":"geo","description":"where"}]}`, true},
		{"a field the document doesn't name", "POST", "/v1/sessions", `{"titel":"t"}`, false},
		{"a message", "POST", "/v1/sessions/s1/messages", `{"content":"hi","reasoning_effort":"low"}`, true},
		{"a message without content", "POST", "/v1/sessions/s1/messages", `{"model":"echo"}`, false},
		{"a kv key holding /", "GET", "/v1/sessions/s1/kv/a/b", ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			err := openapitest.ValidateAccepted(doc, req, openapitest.Pattern(req), []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("validation error %v, want ok %v", err, tc.ok)
			}
		})
	}
}
