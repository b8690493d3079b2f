package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// The session file store through the API, on both engines: a file
// uploaded comes back byte for byte, is listed and deleted, and every
// limit is refused with a 4xx that names it.
func TestSessionFilesThroughTheAPI(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		path := writeConfigAt(t, dbURL, "http:\n  tokens: [\""+apiToken+"\"]\n"+
			"sessions:\n  files:\n    max_file_bytes: 1000\n    max_session_bytes: 1500\n    max_total_bytes: 2500\n")
		_, url, stop := testDaemonAt(t, path, apiOnly)
		defer stop()
		do := func(req *http.Request) (int, []byte, http.Header) {
			t.Helper()
			req.Header.Set("Authorization", "Bearer "+apiToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b, resp.Header
		}
		newSession := func() string {
			req, _ := http.NewRequest("POST", url+"/v1/sessions", strings.NewReader(`{"title":"files"}`))
			req.Header.Set("Content-Type", "application/json")
			status, b, _ := do(req)
			var s struct{ ID string }
			if status != http.StatusCreated && status != http.StatusOK || json.Unmarshal(b, &s) != nil || s.ID == "" {
				t.Fatalf("create a session: %d %s", status, b)
			}
			return s.ID
		}
		upload := func(session, name string, data []byte) (int, string) {
			var body bytes.Buffer
			w := multipart.NewWriter(&body)
			fw, _ := w.CreateFormFile("file", name)
			_, _ = fw.Write(data)
			_ = w.Close()
			req, _ := http.NewRequest("POST", url+"/v1/sessions/"+session+"/files", &body)
			req.Header.Set("Content-Type", w.FormDataContentType())
			status, b, _ := do(req)
			return status, string(b)
		}
		a, b, c := newSession(), newSession(), newSession()
		csv := append([]byte("month,revenue\n"), bytes.Repeat([]byte{0xff, 0x00, 'x'}, 200)...)
		if status, out := upload(a, "report.csv", csv); status != http.StatusCreated || !strings.Contains(out, `"media_type":"text/csv"`) {
			t.Fatalf("upload: %d %s", status, out)
		}
		req, _ := http.NewRequest("GET", url+"/v1/sessions/"+a+"/files/report.csv", nil)
		status, got, h := do(req)
		if status != http.StatusOK || !bytes.Equal(got, csv) || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") {
			t.Fatalf("download: %d, %d bytes (want %d), %v", status, len(got), len(csv), h)
		}
		req, _ = http.NewRequest("GET", url+"/v1/sessions/"+a+"/files", nil)
		if status, got, _ := do(req); status != http.StatusOK || !strings.Contains(string(got), `"name":"report.csv"`) || !strings.Contains(string(got), `"bytes":614`) {
			t.Fatalf("list: %d %s", status, got)
		}
		for _, tc := range []struct {
			name, session, file string
			size                int
			status              int
			names               string
		}{
			{"a file over the file limit", b, "big.bin", 1001, http.StatusRequestEntityTooLarge, "sessions.files.max_file_bytes"},
			{"a session over its limit", a, "more.bin", 900, http.StatusRequestEntityTooLarge, "sessions.files.max_session_bytes"},
			{"a blank name", b, "   ", 10, http.StatusBadRequest, "must not be empty"},
		} {
			if status, out := upload(tc.session, tc.file, make([]byte, tc.size)); status != tc.status || !strings.Contains(out, tc.names) {
				t.Errorf("%s: %d %s; want %d naming %q", tc.name, status, out, tc.status, tc.names)
			}
		}
		if status, out := upload(b, "b.bin", make([]byte, 1000)); status != http.StatusCreated {
			t.Fatalf("upload b: %d %s", status, out)
		}
		if status, out := upload(c, "c.bin", make([]byte, 1000)); status != http.StatusRequestEntityTooLarge || !strings.Contains(out, "sessions.files.max_total_bytes") {
			t.Errorf("over the deployment's limit: %d %s", status, out)
		}
		req, _ = http.NewRequest("POST", url+"/v1/sessions/"+a+"/files", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if status, out, _ := do(req); status != http.StatusUnsupportedMediaType {
			t.Errorf("a JSON body: %d %s", status, out)
		}
		req, _ = http.NewRequest("DELETE", url+"/v1/sessions/"+a+"/files/report.csv", nil)
		if status, out, _ := do(req); status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", status, out)
		}
		req, _ = http.NewRequest("GET", url+"/v1/sessions/"+a+"/files/report.csv", nil)
		if status, _, _ := do(req); status != http.StatusNotFound {
			t.Fatalf("a deleted file: %d", status)
		}
	})
}
