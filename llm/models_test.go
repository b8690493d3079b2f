package llm_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parleyd/parley/llm"
)

// The models a server lists, in its order, with the key it was given; a
// failure names the server without the password its URL may hold.
func TestListModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer sk-local" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"llama3.2"},{"id":""},{"id":"qwen2.5:7b"}]}`))
	}))
	defer srv.Close()
	got, err := llm.ListModels(context.Background(), srv.URL+"/v1/", "sk-local")
	if err != nil || strings.Join(got, ",") != "llama3.2,qwen2.5:7b" {
		t.Fatalf("ListModels = %q, %v", got, err)
	}
	if _, err := llm.ListModels(context.Background(), srv.URL+"/v1", "wrong"); err == nil || !strings.Contains(err.Error(), "/v1/models answered HTTP 401") {
		t.Fatalf("a refused key: %v", err)
	}
	withPassword := strings.Replace(srv.URL, "http://", "http://me:hunter2secret@", 1) + "/nowhere"
	_, err = llm.ListModels(context.Background(), withPassword, "wrong")
	if err == nil || strings.Contains(err.Error(), "hunter2secret") {
		t.Fatalf("a failure with a password in the URL: %v", err)
	}
}
