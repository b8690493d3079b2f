package whatsapp

import (
	"context"
	"testing"

	"go.mau.fi/whatsmeow"

	"github.com/parleyd/parley/adapters"
)

// A document is uploaded and sent as a document message naming it, with
// its caption; an image as an image message; the idempotency key is the
// message id, as for text.
func TestSendFileAsDocumentOrImage(t *testing.T) {
	a, fc, _ := connectedAdapter(t, "")
	ctx := context.Background()
	csv := []byte("a,b\n1,2\n")
	sent, err := a.SendFile(ctx, adapters.Outbound{ChatID: alicePN.String(), Text: "your report", IdempotencyKey: "r1:f0",
		File: &adapters.File{Name: "report.csv", MediaType: "text/csv", Data: csv}})
	if err != nil {
		t.Fatal(err)
	}
	m := fc.lastSent(t)
	doc := m.msg.GetDocumentMessage()
	if doc == nil || doc.GetFileName() != "report.csv" || doc.GetCaption() != "your report" || doc.GetMimetype() != "text/csv" ||
		doc.GetDirectPath() != "/v/t62/upload-1" || doc.GetFileLength() != uint64(len(csv)) || m.to != alicePN {
		t.Fatalf("sent %v to %v", m.msg, m.to)
	}
	if sent.MessageID != string(messageID(a.id, "r1:f0")) {
		t.Fatalf("message id %q, want the key's", sent.MessageID)
	}
	if _, err := a.SendFile(ctx, adapters.Outbound{ChatID: alicePN.String(), File: &adapters.File{Name: "chart.png", MediaType: "image/png", Data: []byte("png")}}); err != nil {
		t.Fatal(err)
	}
	img := fc.lastSent(t).msg.GetImageMessage()
	if img == nil || img.GetMimetype() != "image/png" || img.Caption != nil || img.GetDirectPath() != "/v/t62/upload-2" {
		t.Fatalf("sent %v, want an image message", fc.lastSent(t).msg)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.uploads) != 2 || string(fc.uploads[0].data) != string(csv) || fc.uploads[0].kind != whatsmeow.MediaDocument || fc.uploads[1].kind != whatsmeow.MediaImage {
		t.Fatalf("uploads %+v", fc.uploads)
	}
}
