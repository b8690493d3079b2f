package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkFileTransferRSS runs parley as its own process (SQLite, the
// default file limits) and uploads a 20 MB file to a session's file store
// through the API, then downloads it, sampling parley's RSS every 2 ms
// through each. The target is a peak within 2 × the file's size over the
// RSS when idle; it reports the idle RSS, each peak and the peak over
// idle in files' sizes. Run it once:
//
//	go test -run '^$' -bench BenchmarkFileTransferRSS -benchtime 3x ./cmd/parley/
func BenchmarkFileTransferRSS(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads parley's memory from /proc/<pid>/status, which only Linux has")
	}
	const size = 20_000_000
	dir := b.TempDir()
	config := "database:\n  url: " + filepath.Join(dir, "parley.db") + "\n" +
		"http:\n  listen: 127.0.0.1:0\n  tokens: [\"" + apiToken + "\"]\n"
	var p *parleyProcess
	var base string
	do := func(method, path, typ string, body io.Reader) *http.Response {
		b.Helper()
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		if typ != "" {
			req.Header.Set("Content-Type", typ)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			p.fatalf("%s %s: %v", method, path, err)
		}
		return resp
	}
	// start runs parley afresh and returns its RSS once settled (the
	// start's garbage collected, the API's first request served).
	start := func() int64 {
		var addr string
		p, addr = startParleyHTTP(b, config)
		base = "http://" + addr
		do("GET", "/v1/sessions?limit=1", "", nil).Body.Close()
		time.Sleep(2 * time.Second)
		return rss(b, p.pid)
	}
	start()
	resp := do("POST", "/v1/sessions", "application/json", strings.NewReader(`{"title":"files"}`))
	var sess struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || sess.ID == "" {
		p.fatalf("create a session: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	p.stop(30 * time.Second)
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	want := sha256.Sum256(data)

	// peakDuring is parley's highest RSS sampled while f runs.
	peakDuring := func(f func()) int64 {
		var mu sync.Mutex
		peak := rss(b, p.pid)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if v, err := vmRSS(p.pid); err == nil {
					mu.Lock()
					peak = max(peak, v)
					mu.Unlock()
				}
			}
		}()
		f()
		close(done)
		wg.Wait()
		return max(peak, rss(b, p.pid))
	}
	var upPeak, downPeak, idle int64
	b.ResetTimer()
	for i := range b.N {
		name := "big-" + strconv.Itoa(i) + ".bin"
		// Each in a process of its own, so one's memory held for reuse is
		// not counted as the other's.
		upIdle := start()
		up := peakDuring(func() {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				fw, err := mw.CreateFormFile("file", name)
				if err == nil {
					_, err = io.Copy(fw, bytes.NewReader(data))
				}
				if err == nil {
					err = mw.Close()
				}
				pw.CloseWithError(err)
			}()
			resp := do("POST", "/v1/sessions/"+sess.ID+"/files", mw.FormDataContentType(), pr)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				p.fatalf("upload: %d %s", resp.StatusCode, body)
			}
		})
		p.stop(30 * time.Second)
		downIdle := start()
		down := peakDuring(func() {
			resp := do("GET", "/v1/sessions/"+sess.ID+"/files/"+name, "", nil)
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || n != size || !bytes.Equal(h.Sum(nil), want[:]) {
				p.fatalf("download: %d, %d bytes, %v; want the file's bytes", resp.StatusCode, n, err)
			}
		})
		b.Logf("%d: upload: idle %.1f MB, peak %.1f MB; download: idle %.1f MB, peak %.1f MB", i, float64(upIdle)/1e6, float64(up)/1e6, float64(downIdle)/1e6, float64(down)/1e6)
		idle = max(idle, upIdle, downIdle)
		upPeak, downPeak = max(upPeak, up-upIdle), max(downPeak, down-downIdle)
		// The file goes, so the next upload is a new file again.
		resp := do("DELETE", "/v1/sessions/"+sess.ID+"/files/"+name, "", nil)
		resp.Body.Close()
		p.stop(30 * time.Second)
	}
	b.StopTimer()
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	b.ReportMetric(mb(idle), "rss-idle-MB")
	b.ReportMetric(mb(upPeak), "upload-over-idle-MB")
	b.ReportMetric(mb(downPeak), "download-over-idle-MB")
	b.ReportMetric(float64(max(upPeak, downPeak))/size, "over-idle/file")
	if over := max(upPeak, downPeak); over > 2*size {
		b.Errorf("parley's RSS rose %.1f MB over idle (up to %.1f MB) for a %.0f MB file; the target is at most 2 × the file", mb(over), mb(idle), mb(size))
	}
}

// vmRSS is process pid's resident set size, in bytes.
func vmRSS(pid string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, os.ErrNotExist
}
