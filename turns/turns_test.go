package turns

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/adapterstest"
	"github.com/parleyd/parley/config"
)

// fetchingRecorder is a channel that records sends and fetches files.
type fetchingRecorder struct {
	*adapterstest.Recorder
	files map[string][]byte
}

func (f fetchingRecorder) Fetch(_ context.Context, ref adapters.FileRef, maxBytes int64) ([]byte, string, error) {
	b, ok := f.files[ref.ID]
	if !ok {
		return nil, "", fmt.Errorf("no file %s", ref.ID)
	}
	if int64(len(b)) > maxBytes {
		return nil, "", fmt.Errorf("file %s: %w", ref.ID, adapters.ErrTooLarge)
	}
	return b, "image/png", nil
}

// onePagePDF is a well-formed one-page PDF showing text in Helvetica.
func onePagePDF(text string) []byte {
	var b bytes.Buffer
	var offs []int
	obj := func(s string) {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), s)
	}
	b.WriteString("%PDF-1.4\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>")
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
	obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offs)+1, xref)
	return b.Bytes()
}

// turnFiles shares one allowance of file text across a turn's messages,
// and tells the sender of each file it couldn't open, and why.
func TestTurnFiles(t *testing.T) {
	rec := fetchingRecorder{adapterstest.New(), map[string][]byte{"a": []byte("0123456789"), "b": []byte("abcdefghij")}}
	chans := map[adapters.ID]adapters.Adapter{"tg": rec, "api": adapterstest.New()}
	d := New(Options{Channel: func(id adapters.ID) (adapters.Adapter, bool) { a, ok := chans[id]; return a, ok }})
	msgs := []adapters.Inbound{
		{Adapter: "api", Files: []adapters.FileRef{{ID: "c", Name: "c.md", MediaType: "text/markdown"}}},
		{Adapter: "tg", Files: []adapters.FileRef{{ID: "a", Name: "a.txt", MediaType: "text/plain"}, {ID: "gone", Name: "gone.json", MediaType: "application/json"}}},
		{Adapter: "tg", Files: []adapters.FileRef{{ID: "b", Name: "b.csv", MediaType: "text/csv; charset=utf-8"}, {ID: "a", Name: "late.txt", MediaType: "text/plain"}}},
	}
	parts, notices := d.turnFiles(context.Background(), config.Agent{Files: config.AgentFiles{MaxTextBytes: 15}}, d.newFetch(context.Background(), "", msgs, nil, false))
	texts := []string{parts[0][0].Text, parts[1][0].Text, parts[1][1].Text, parts[2][0].Text, parts[2][1].Text}
	if want := []string{"", "0123456789", "", "abcde", ""}; !slices.Equal(texts, want) {
		t.Errorf("texts %q, want %q", texts, want)
	}
	if d, _ := parts[2][0].File(); !strings.Contains(d.Note, "only its first 5 B") {
		t.Errorf("the cut file's note: %q", d.Note)
	}
	if d, _ := parts[2][1].File(); !strings.Contains(d.Note, "past this turn's allowance") {
		t.Errorf("the file past the allowance: %q", d.Note)
	}
	want := []string{"(I couldn't open gone.json; please send it again.)",
		"(I can't open files sent this way, so I read only the name of c.md.)"}
	if !slices.Equal(notices, want) {
		t.Errorf("notices %q, want %q", notices, want)
	}
}

func TestKindOfFile(t *testing.T) {
	for _, tc := range []struct {
		f    adapters.FileRef
		want fileKind
	}{
		{adapters.FileRef{Name: "a.txt", MediaType: "text/plain"}, fileText},
		{adapters.FileRef{Name: "a", MediaType: "Application/JSON; charset=utf-8"}, fileText},
		{adapters.FileRef{Name: "a", MediaType: "application/ld+json"}, fileText},
		{adapters.FileRef{Name: "notes.MD"}, fileText},
		{adapters.FileRef{Name: "data.csv", MediaType: "application/octet-stream"}, fileText},
		{adapters.FileRef{Name: "r.pdf", MediaType: "application/pdf"}, filePDF},
		{adapters.FileRef{Name: "r.pdf"}, filePDF},
		{adapters.FileRef{Name: "p.jpg", MediaType: "image/jpeg"}, fileImage},
		{adapters.FileRef{Name: "voice.ogg", MediaType: "audio/ogg"}, fileUnreadable},
		{adapters.FileRef{Name: "c.docx", MediaType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}, fileUnreadable},
		{adapters.FileRef{Name: "a.txt", MediaType: "application/zip"}, fileUnreadable},
		{adapters.FileRef{Name: "blob"}, fileUnreadable},
	} {
		if got := kindOfFile(tc.f); got != tc.want {
			t.Errorf("kindOfFile(%+v) = %d, want %d", tc.f, got, tc.want)
		}
	}
}

// A damaged PDF is an error, never a panic.
func TestPDFTextOfADamagedFile(t *testing.T) {
	good := onePagePDF("hello")
	for _, raw := range [][]byte{nil, []byte("%PDF-1.4\ngarbage"), good[:len(good)/2], bytes.Replace(good, []byte("/Contents 4 0 R"), []byte("/Contents 9 0 R"), 1)} {
		if text, err := pdfText(raw); err == nil && text != "" {
			t.Errorf("pdfText of %d damaged bytes = %q", len(raw), text)
		}
	}
	if text, err := pdfText(good); err != nil || text != "hello" {
		t.Errorf("pdfText = %q, %v", text, err)
	}
}

// A batch of messages (collect mode) shows the model at most 10 images in
// all, and says so.
func TestTurnImagesCapsAPrompt(t *testing.T) {
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	rec := fetchingRecorder{adapterstest.New(), map[string][]byte{"p": pic.Bytes()}}
	d := New(Options{Channel: func(id adapters.ID) (adapters.Adapter, bool) { return rec, id == "tg" }})
	var six []adapters.FileRef
	for range 6 {
		six = append(six, adapters.FileRef{ID: "p", MediaType: "image/png"})
	}
	msgs := []adapters.Inbound{{Adapter: "tg", Files: six}, {Adapter: "tg", Text: "no photo"}, {Adapter: "tg", Files: six}}
	images, notices := d.turnImages(context.Background(), config.Agent{Vision: true}, d.newFetch(context.Background(), "", msgs, nil, false))
	if len(images[0]) != 6 || len(images[1]) != 0 || len(images[2]) != 4 {
		t.Fatalf("images per message: %d %d %d", len(images[0]), len(images[1]), len(images[2]))
	}
	if len(notices) != 1 || !strings.Contains(notices[0], "first 10 images") {
		t.Fatalf("notices %q", notices)
	}
}
