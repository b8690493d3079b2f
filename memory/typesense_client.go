package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// typesenseClient speaks the few endpoints of Typesense's REST API the
// index uses: a collection's schema (get, create, drop), document upsert,
// JSONL import and delete, and search. The official client covers the
// whole API; this is what parley calls of it, over net/http.
type typesenseClient struct {
	base   string // the server URL without a trailing slash
	apiKey string
	http   *http.Client
}

// typesenseHTTPError is an answer other than the endpoint's success.
type typesenseHTTPError struct {
	Status int
	Body   []byte
}

func (e *typesenseHTTPError) Error() string {
	return fmt.Sprintf("status: %d response: %s", e.Status, e.Body)
}

// maxTypesenseErrorBody caps how much of an error answer is read.
const maxTypesenseErrorBody = 64 << 10

type typesenseField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Facet    bool   `json:"facet,omitempty"`
	Optional bool   `json:"optional,omitempty"`
	Index    *bool  `json:"index,omitempty"`
}

type typesenseSchema struct {
	Name                string           `json:"name"`
	Fields              []typesenseField `json:"fields"`
	DefaultSortingField string           `json:"default_sorting_field,omitempty"`
}

type typesenseSearchResult struct {
	Hits []struct {
		Document  map[string]any `json:"document"`
		TextMatch *float64       `json:"text_match"`
	} `json:"hits"`
}

type typesenseImportResult struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

// collectionPath is /collections/<name>, then each of more escaped as a
// path segment.
func collectionPath(name string, more ...string) string {
	p := "/collections/" + url.PathEscape(name)
	for _, m := range more {
		p += "/" + url.PathEscape(m)
	}
	return p
}

// do sends a request and returns the response when its status is want;
// any other status is a *typesenseHTTPError with the body it carried.
func (c *typesenseClient) do(ctx context.Context, method, path string, query url.Values, contentType string, body io.Reader, want int) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-TYPESENSE-API-KEY", c.apiKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxTypesenseErrorBody))
		return nil, &typesenseHTTPError{Status: resp.StatusCode, Body: b}
	}
	return resp, nil
}

// call sends v (if not nil) as JSON and decodes the answer into out (if
// not nil).
func (c *typesenseClient) call(ctx context.Context, method, path string, query url.Values, v any, want int, out any) error {
	var body io.Reader
	contentType := ""
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, query, contentType, body, want)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func (c *typesenseClient) collection(ctx context.Context, name string) (typesenseSchema, error) {
	var s typesenseSchema
	err := c.call(ctx, http.MethodGet, collectionPath(name), nil, nil, http.StatusOK, &s)
	return s, err
}

func (c *typesenseClient) createCollection(ctx context.Context, s typesenseSchema) error {
	return c.call(ctx, http.MethodPost, "/collections", nil, s, http.StatusCreated, nil)
}

func (c *typesenseClient) dropCollection(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, collectionPath(name), nil, nil, http.StatusOK, nil)
}

func (c *typesenseClient) upsert(ctx context.Context, coll string, doc any) error {
	return c.call(ctx, http.MethodPost, collectionPath(coll)+"/documents", url.Values{"action": {"upsert"}}, doc, http.StatusCreated, nil)
}

func (c *typesenseClient) deleteDocument(ctx context.Context, coll, id string) error {
	return c.call(ctx, http.MethodDelete, collectionPath(coll, "documents", id), nil, nil, http.StatusOK, nil)
}

// importJSONL upserts n documents given one JSON object a line; the
// answer holds Typesense's result for each, one a line, in order.
func (c *typesenseClient) importJSONL(ctx context.Context, coll string, jsonl io.Reader, n int) (io.ReadCloser, error) {
	q := url.Values{"action": {"upsert"}, "batch_size": {strconv.Itoa(n)}}
	resp, err := c.do(ctx, http.MethodPost, collectionPath(coll)+"/documents/import", q, "application/octet-stream", jsonl, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// search runs a search; params are Typesense's query parameters (q,
// query_by, filter_by...).
func (c *typesenseClient) search(ctx context.Context, coll string, params url.Values) (typesenseSearchResult, error) {
	var r typesenseSearchResult
	err := c.call(ctx, http.MethodGet, collectionPath(coll)+"/documents/search", params, nil, http.StatusOK, &r)
	return r, err
}

func newTypesenseClient(server, apiKey string, client *http.Client) *typesenseClient {
	return &typesenseClient{base: strings.TrimRight(server, "/"), apiKey: apiKey, http: client}
}
