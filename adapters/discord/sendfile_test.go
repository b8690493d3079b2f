package discord

import (
	"testing"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/adapters/discord/discordtest"
)

// A file goes as an attachment of one message, with its caption as the
// message's text, as a reply.
func TestSendFileAttaches(t *testing.T) {
	t.Parallel()
	srv := discordtest.NewServer(t, discordtest.Options{})
	a := newAdapter(t, srv, "", nil)
	ctx := waitCtx(t)
	if a.MaxFileBytes() != MaxUploadBytes {
		t.Fatalf("MaxFileBytes = %d", a.MaxFileBytes())
	}
	data := []byte("a,b\n1,2\n")
	sent, err := a.SendFile(ctx, adapters.Outbound{ChatID: chanID, Text: "the numbers", ReplyTo: "5001",
		File: &adapters.File{Name: "n.csv", MediaType: "text/csv", Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Sent()
	if len(msgs) != 1 || msgs[0].ID != sent.MessageID || msgs[0].Content != "the numbers" || len(msgs[0].Files) != 1 {
		t.Fatalf("the fake got %+v", msgs)
	}
	f := msgs[0].Files[0]
	if f.Name != "n.csv" || f.ContentType != "text/csv" || string(f.Data) != string(data) {
		t.Fatalf("attachment %+v (%q)", f, f.Data)
	}
	if r := msgs[0].MessageReference; r == nil || r.MessageID != "5001" {
		t.Fatalf("message_reference %+v, want the reply to 5001", r)
	}
	// Without a caption, the attachment alone.
	if _, err := a.SendFile(ctx, adapters.Outbound{ChatID: chanID, File: &adapters.File{Name: "x.png", MediaType: "image/png", Data: []byte("png")}}); err != nil {
		t.Fatal(err)
	}
	if msgs := srv.Sent(); len(msgs) != 2 || msgs[1].Content != "" || len(msgs[1].Files) != 1 {
		t.Fatalf("the fake got %+v", msgs)
	}
}
