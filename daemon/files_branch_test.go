package daemon

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/sessions"
)

// A branch gets copies of its parent's files, in the branch's own
// transaction: deleting one there leaves the parent's, and deleting the
// parent session deletes its files and leaves the branch's.
func TestBranchCopiesTheSessionsFiles(t *testing.T) {
	eachEngine(t, func(t *testing.T, dbURL string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, url, stop := testDaemonOn(t, dbURL, "gateway:\n  debounce: 0s\nhttp:\n  tokens: [\""+apiToken+"\"]\n", apiOnly)
		defer stop()
		c := &client.Client{Base: url, Token: apiToken}
		var parent struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"title": "parent"}, &parent); err != nil {
			t.Fatal(err)
		}
		photo := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1, 2, 3}, 50)...)
		var body bytes.Buffer
		w := multipart.NewWriter(&body)
		fw, _ := w.CreateFormFile("file", "cat.png")
		_, _ = fw.Write(photo)
		_ = w.Close()
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/sessions/"+parent.ID+"/files", &body)
		req.Header.Set("Content-Type", w.FormDataContentType())
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload: %v %v", resp, err)
		}
		resp.Body.Close()
		if err := c.Do(ctx, "POST", "/v1/sessions/"+parent.ID+"/messages", map[string]any{"content": "look at the cat"}, &struct{}{}); err != nil {
			t.Fatal(err)
		}
		var msgs []sessions.Message
		waitUntil(t, 20*time.Second, "the turn's reply and the run's end", func() bool {
			msgs, _ = d.sessions.Messages(ctx, sessions.ID(parent.ID), sessions.MessagesOptions{})
			var st struct {
				State string `json:"state"`
			}
			// A branch waits for the run to end (409 while it goes on).
			return len(msgs) >= 2 && c.Do(ctx, "GET", "/v1/sessions/"+parent.ID+"/status", nil, &st) == nil && st.State == "idle"
		})
		var branch struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", "/v1/sessions/"+parent.ID+"/branch", map[string]any{"from_message_id": msgs[0].ID}, &branch); err != nil {
			t.Fatal(err)
		}
		download := func(session string) (int, []byte) {
			req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/sessions/"+session+"/files/cat.png", nil)
			req.Header.Set("Authorization", "Bearer "+apiToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, b
		}
		if status, got := download(branch.ID); status != http.StatusOK || !bytes.Equal(got, photo) {
			t.Fatalf("the branch's cat.png: %d, %d bytes; want the parent's %d", status, len(got), len(photo))
		}
		del := func(path string) {
			resp, err := c.Request(ctx, "DELETE", path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		del("/v1/sessions/" + branch.ID + "/files/cat.png")
		if status, got := download(parent.ID); status != http.StatusOK || !bytes.Equal(got, photo) {
			t.Fatalf("deleting the branch's copy touched the parent's: %d", status)
		}
		if _, err := d.files.Put(ctx, sessions.ID(branch.ID), "cat.png", "image/png", photo); err != nil {
			t.Fatal(err)
		}
		del("/v1/sessions/" + parent.ID)
		var left int
		if err := d.db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM session_files WHERE session_id = $1`, parent.ID).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d files of the deleted session left (%v)", left, err)
		}
		if status, _ := download(branch.ID); status != http.StatusOK {
			t.Fatalf("deleting the parent took the branch's file: %d", status)
		}
	})
}
