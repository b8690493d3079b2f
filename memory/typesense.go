package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker"
	"github.com/typesense/typesense-go/v3/typesense"
	"github.com/typesense/typesense-go/v3/typesense/api"
	"github.com/typesense/typesense-go/v3/typesense/api/pointer"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/internal/lazyregexp"
	"github.com/parleyd/parley/textcut"
)

// DefaultTypesenseCollection is the collection used when none is
// configured: the config's default.
const DefaultTypesenseCollection = config.DefaultTypesenseCollection

// TypesenseOptions configures the Typesense index.
type TypesenseOptions struct {
	// URL is the server, e.g. http://localhost:8108.
	URL string
	// APIKey is sent in the X-TYPESENSE-API-KEY header. It never appears in
	// an error or a log line; printing TypesenseOptions shows "[redacted]".
	APIKey string
	// Collection defaults to DefaultTypesenseCollection.
	Collection string
	// Timeout bounds each request; default 5s.
	Timeout time.Duration
}

// String keeps fmt from printing the API key.
func (o TypesenseOptions) String() string {
	key := ""
	if o.APIKey != "" {
		key = "[redacted]"
	}
	return fmt.Sprintf("{URL:%s APIKey:%s Collection:%s Timeout:%s}", redactedURL(o.URL), key, o.Collection, o.Timeout)
}

// GoString keeps %#v from printing the API key.
func (o TypesenseOptions) GoString() string { return o.String() }

// LogValue keeps slog from printing the API key.
func (o TypesenseOptions) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", redactedURL(o.URL)), slog.String("collection", o.Collection),
		slog.Bool("api_key_set", o.APIKey != ""))
}

// redactedURL hides a password someone put in the URL.
func redactedURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable url)"
}

var collectionName = lazyregexp.New(`^[A-Za-z0-9_-]{1,128}$`)

// Typesense is an Index in a Typesense collection. Documents carry their
// scope (agent, user, workspace, as facets) and its scope_key, and every
// search filters on scope_key. Writes reach it through the queue and an
// Indexer; the collection is created when missing.
type Typesense struct {
	client     *typesense.Client
	collection string
	server     string
	apiKey     string // kept only to scrub it from errors

	mu      sync.Mutex
	ensured bool
}

var (
	_ Index         = (*Typesense)(nil)
	_ resetter      = (*Typesense)(nil)
	_ batchUpserter = (*Typesense)(nil)
)

// NewTypesense checks opts and returns the index. It does no I/O: Ensure
// (or the first write) creates the collection.
func NewTypesense(opts TypesenseOptions) (*Typesense, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("typesense: the url must be http:// or https:// with a host, e.g. http://localhost:8108")
	}
	if u.User != nil {
		return nil, errors.New("typesense: put the API key in api_key, not in the url")
	}
	if opts.APIKey == "" {
		return nil, errors.New("typesense: the api key is empty; set it to an admin key of the server")
	}
	if opts.Collection == "" {
		opts.Collection = DefaultTypesenseCollection
	}
	if !collectionName.MatchString(opts.Collection) {
		return nil, fmt.Errorf("typesense: collection %q must be 1 to 128 letters, digits, '_' or '-'", opts.Collection)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	// One server, so the client sends each request once (its retries go
	// across nodes); its circuit breaker stays on.
	client := typesense.NewClient(typesense.WithServer(u.String()), typesense.WithAPIKey(opts.APIKey),
		typesense.WithConnectionTimeout(opts.Timeout))
	return &Typesense{client: client, collection: opts.Collection, server: u.Redacted(), apiKey: opts.APIKey}, nil
}

// Name implements Index.
func (t *Typesense) Name() string { return "typesense" }

// typesenseFields is the collection schema. The scope fields are facets, so
// they filter and can be counted; scope_key is what searches filter on.
func typesenseFields() []api.Field {
	facet := func(name string) api.Field { return api.Field{Name: name, Type: "string", Facet: pointer.True()} }
	return []api.Field{
		facet("kind"), facet("agent"), facet("user"), facet("workspace"), facet("scope_key"),
		{Name: "content", Type: "string"},
		{Name: "tags", Type: "string[]", Facet: pointer.True(), Optional: pointer.True()},
		{Name: "session_id", Type: "string", Index: pointer.False(), Optional: pointer.True()},
		{Name: "created_at", Type: "int64"},
	}
}

// coll is the index's collection in the client.
func (t *Typesense) coll() typesense.CollectionInterface[map[string]any] {
	return t.client.Collection(t.collection)
}

// Ensure creates the collection if it is missing, and checks that an
// existing one has the fields searches need.
func (t *Typesense) Ensure(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ensured {
		return nil
	}
	got, err := t.coll().Retrieve(ctx)
	switch {
	case err == nil:
		have := map[string]bool{}
		for _, f := range got.Fields {
			have[f.Name] = true
		}
		for _, f := range typesenseFields() {
			if !have[f.Name] {
				return fmt.Errorf("typesense collection %s exists without the field %s; point memory at another collection, or drop this one and run \"parley memory reindex\"", t.collection, f.Name)
			}
		}
	case statusOf(err) == http.StatusNotFound:
		_, err = t.client.Collections().Create(ctx, &api.CollectionSchema{
			Name: t.collection, Fields: typesenseFields(), DefaultSortingField: pointer.String("created_at"),
		})
		if err != nil && statusOf(err) != http.StatusConflict { // 409: another replica made it first
			return t.fail("create collection", err)
		}
	default:
		return t.fail("read collection", err)
	}
	t.ensured = true
	return nil
}

type typesenseDoc struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	Agent     string   `json:"agent"`
	User      string   `json:"user"`
	Workspace string   `json:"workspace"`
	ScopeKey  string   `json:"scope_key"`
	Content   string   `json:"content"`
	Tags      []string `json:"tags"`
	SessionID string   `json:"session_id"`
	CreatedAt int64    `json:"created_at"`
}

func toTypesense(d Doc) typesenseDoc {
	tags := d.Tags
	if tags == nil {
		tags = []string{}
	}
	return typesenseDoc{ID: string(d.ID), Kind: string(d.Kind), Agent: d.Scope.Agent, User: d.Scope.User,
		Workspace: d.Scope.Workspace, ScopeKey: d.Scope.key(), Content: d.Content, Tags: tags,
		SessionID: d.SessionID, CreatedAt: d.CreatedAt.UnixMilli()}
}

// Upsert implements Index.
func (t *Typesense) Upsert(ctx context.Context, d Doc) error {
	if err := t.Ensure(ctx); err != nil {
		return err
	}
	if _, err := t.coll().Documents().Upsert(ctx, toTypesense(d), &api.DocumentIndexParameters{}); err != nil {
		t.forgetOn404(err)
		return t.fail("upsert memory "+string(d.ID), err)
	}
	return nil
}

// UpsertBatch writes many documents in one import request.
func (t *Typesense) UpsertBatch(ctx context.Context, docs []Doc) error {
	if len(docs) == 0 {
		return nil
	}
	if err := t.Ensure(ctx); err != nil {
		return err
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, d := range docs {
		if err := enc.Encode(toTypesense(d)); err != nil {
			return fmt.Errorf("encode memory %s for typesense: %w", d.ID, err)
		}
	}
	rc, err := t.coll().Documents().ImportJsonl(ctx, &body, &api.ImportDocumentsParams{
		Action: pointer.Any(api.Upsert), BatchSize: pointer.Int(len(docs)),
	})
	if err != nil {
		t.forgetOn404(err)
		return t.fail("import memories", err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for i := 0; dec.More(); i++ {
		var r api.ImportDocumentResponse
		if err := dec.Decode(&r); err != nil {
			return t.fail("read the import result", err)
		}
		if !r.Success && i < len(docs) {
			return t.fail("import memory "+string(docs[i].ID), errors.New(r.Error))
		}
	}
	return nil
}

// Delete implements Index.
func (t *Typesense) Delete(ctx context.Context, id ItemID) error {
	_, err := t.coll().Document(string(id)).Delete(ctx)
	if err != nil && statusOf(err) != http.StatusNotFound {
		return t.fail("delete memory "+string(id), err)
	}
	return nil
}

// Reset drops and recreates the collection, for Reindex.
func (t *Typesense) Reset(ctx context.Context) error {
	_, err := t.coll().Delete(ctx)
	if err != nil && statusOf(err) != http.StatusNotFound {
		return t.fail("drop collection", err)
	}
	t.mu.Lock()
	t.ensured = false
	t.mu.Unlock()
	return t.Ensure(ctx)
}

// Search implements Index. The scope filter is scope_key:=`<key>`; the key
// is letters only, so the backtick quoting can't be broken out of.
func (t *Typesense) Search(ctx context.Context, scope Scope, text string, limit int) ([]Hit, error) {
	q, ok, err := searchQuery(scope, text, limit)
	if !ok {
		return nil, err
	}
	key := scope.key()
	res, err := t.coll().Documents().Search(ctx, &api.SearchCollectionParams{
		Q:             pointer.String(q.typesense()),
		QueryBy:       pointer.String("content,tags"),
		FilterBy:      pointer.String(typesenseScopeFilter(scope)),
		SortBy:        pointer.String("_text_match:desc,created_at:desc"),
		PerPage:       pointer.Int(limit),
		IncludeFields: pointer.String("id,scope_key"),
	})
	if err != nil {
		t.forgetOn404(err)
		return nil, t.fail("search", err)
	}
	var hits []Hit
	for _, h := range pointerValue(res.Hits) {
		doc := pointerValue(h.Document)
		id, _ := doc["id"].(string)
		if k, _ := doc["scope_key"].(string); id == "" || k != key {
			continue // never trust a hit outside the scope asked for
		}
		hit := Hit{ID: ItemID(id)}
		if h.TextMatch != nil {
			hit.Score = float64(*h.TextMatch)
		}
		hits = append(hits, hit)
	}
	return hits, nil
}

func typesenseScopeFilter(s Scope) string { return "scope_key:=`" + s.key() + "`" }

// forgetOn404 makes the next write recreate a collection someone dropped.
func (t *Typesense) forgetOn404(err error) {
	if statusOf(err) == http.StatusNotFound {
		t.mu.Lock()
		t.ensured = false
		t.mu.Unlock()
	}
}

// pointerValue is what p points at, or the zero value for nil.
func pointerValue[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

func statusOf(err error) int {
	var he *typesense.HTTPError
	if errors.As(err, &he) {
		return he.Status
	}
	return 0
}

// indexError is a Typesense failure described without the API key. It keeps
// no reference to the original error, whose text could carry the key.
type indexError struct {
	msg         string
	unavailable bool
}

func (e *indexError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrIndexUnavailable) report a failure worth retrying.
func (e *indexError) Is(target error) bool { return target == ErrIndexUnavailable && e.unavailable }

// maxErrorBody caps how much of a response body an error quotes.
const maxErrorBody = 200

func (t *Typesense) fail(op string, err error) error {
	var he *typesense.HTTPError
	var msg string
	unavailable := true
	switch {
	case errors.As(err, &he):
		// Scrub before cutting, so no part of the key survives a cut.
		body := strings.TrimSpace(t.scrub(string(he.Body)))
		body = textcut.Bytes(body, maxErrorBody, "...")
		msg = fmt.Sprintf("answered %d: %s", he.Status, body)
		switch {
		case he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden:
			msg += " (check the memory index's typesense api key)"
			unavailable = false
		case he.Status == http.StatusNotFound && op == "search":
			msg += ` (the collection is missing; "parley memory reindex" recreates and fills it)`
			unavailable = false
		case he.Status < 500 && he.Status != http.StatusTooManyRequests:
			unavailable = false
		}
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		msg = "not asked: most requests to it failed in the last two minutes, so the client pauses for a minute before trying again (its circuit breaker); check that the server is up"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		msg = err.Error()
	default:
		msg = fmt.Sprintf("unreachable: %v", err)
	}
	msg = t.scrub(fmt.Sprintf("typesense %s (collection %s at %s): %s", op, t.collection, t.server, msg))
	return &indexError{msg: msg, unavailable: unavailable}
}

// scrub replaces the API key in s.
func (t *Typesense) scrub(s string) string {
	if t.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, t.apiKey, "[redacted]")
}
