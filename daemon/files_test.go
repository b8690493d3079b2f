package daemon

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyd/parley/adapters/telegram/telegramtest"
	"github.com/parleyd/parley/sessions"
)

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

// A document sent on Telegram without a caption reaches the model, end to
// end: a line naming it (name, type, size), and the text of a text-like
// file or a PDF, cut at the agent's files.max_text_bytes; anything else is
// named, and the sender is told which files parley reads. The file is
// stored with the message.
func TestDocumentsWithoutCaptionReachTheModel(t *testing.T) {
	long := strings.Repeat("month,revenue\n", 20) // 280 bytes, over the 200 allowed
	cases := []struct {
		name       string
		doc        telegramtest.Document
		data       []byte
		wantModel  []string // in the model's user message
		wantReply  string   // in the reply, beyond the echo
		wantStored string   // the stored part's text
	}{
		{"plain text", telegramtest.Document{FileName: "notes.txt", MimeType: "text/plain"}, []byte("Buy milk.\nCall Bob at noon.\n"),
			[]string{"[File: notes.txt, text/plain, 28 B]", "--- notes.txt ---\nBuy milk.\nCall Bob at noon.\n--- end of notes.txt ---"}, "",
			"Buy milk.\nCall Bob at noon.\n"},
		{"markdown by its name", telegramtest.Document{FileName: "plan.md", MimeType: "application/octet-stream"}, []byte("# Plan\n- ship it\n"),
			[]string{"[File: plan.md, application/octet-stream, 17 B]", "# Plan\n- ship it"}, "", "# Plan\n- ship it\n"},
		{"pdf", telegramtest.Document{FileName: "report.pdf", MimeType: "application/pdf"}, onePagePDF("Quarterly revenue rose 12 percent"),
			[]string{"[File: report.pdf, application/pdf, ", "--- report.pdf ---\nQuarterly revenue rose 12 percent\n--- end of report.pdf ---"}, "",
			"Quarterly revenue rose 12 percent"},
		{"cut at the limit", telegramtest.Document{FileName: "sales.csv", MimeType: "text/csv"}, []byte(long),
			[]string{"[File: sales.csv, text/csv, 280 B; only its first 200 B are here (files.max_text_bytes)]", long[:200] + "\n--- end of sales.csv ---"}, "",
			long[:200]},
		{"unreadable", telegramtest.Document{FileName: "contract.docx", MimeType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
			[]byte("PK\x03\x04 binary"),
			[]string{"[File: contract.docx, application/vnd.openxmlformats-officedocument.wordprocessingml.document, 11 B; parley can't read this type of file; only its name is here]"},
			"(I can't read contract.docx: I read plain text, Markdown, CSV, JSON and PDF files, and images when this agent's model can see them.)", ""},
	}
	tg := telegramtest.NewServer()
	defer tg.Close()
	d, stop := runWithTelegram(t, tg, "agents:\n  - id: default\n    files:\n      max_text_bytes: 200\n")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chat := int64(100 + i) // a session each
			doc := tc.doc
			doc.FileID, doc.FileUniqueID, doc.FileSize = fmt.Sprint("doc-", i), fmt.Sprint("u-", i), len(tc.data)
			tg.AddFile(doc.FileID, tc.data)
			tg.Inject(telegramtest.Update{Message: &telegramtest.Message{
				MessageID: tg.NextMessageID(fmt.Sprint(chat)),
				From:      &telegramtest.User{ID: chat, FirstName: "Ann"},
				Chat:      telegramtest.PrivateChat(telegramtest.User{ID: chat, FirstName: "Ann"}),
				Date:      time.Now().Unix(),
				Document:  &doc,
			}})
			sent, err := tg.WaitSent(ctx, i+1)
			if err != nil {
				t.Fatal(err)
			}
			reply := sent[i].Text
			var model string // the user message the model was sent
			for _, r := range d.offline.Requests() {
				for _, m := range r.Messages {
					if strings.Contains(m.Content, "[File: "+doc.FileName) {
						model = m.Content
					}
				}
			}
			for _, want := range tc.wantModel {
				if !strings.Contains(model, want) {
					t.Errorf("the model was sent %q, without %q", model, want)
				}
			}
			if tc.wantReply != "" && !strings.Contains(reply, tc.wantReply) {
				t.Errorf("reply %q lacks %q", reply, tc.wantReply)
			}
			if tc.wantReply == "" && strings.HasPrefix(reply, "(") {
				t.Errorf("an unexpected notice: %q", reply)
			}

			// Stored: the message as sent (no caption), and a part naming the file.
			ss, err := d.sessions.ActiveInChat(ctx, "telegram", fmt.Sprint(chat))
			if err != nil || len(ss) != 1 {
				t.Fatalf("sessions of chat %d: %v, %v", chat, ss, err)
			}
			msgs, err := d.sessions.Messages(ctx, ss[0].ID, sessions.MessagesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The file's part, then the record of what the turn ran with.
			if len(msgs) == 0 || msgs[0].Role != sessions.RoleUser || msgs[0].Content != "" || len(msgs[0].Parts) != 2 || msgs[0].Parts[1].Type != "turn" {
				t.Fatalf("stored %+v", msgs)
			}
			p := msgs[0].Parts[0]
			fd, ok := p.File()
			if !ok || p.Name != doc.FileName || p.MediaType != doc.MimeType || fd.ID != doc.FileID || fd.Size != int64(len(tc.data)) ||
				p.Text != tc.wantStored {
				t.Errorf("stored part %+v (%+v), want %s's with text %q", p, fd, doc.FileName, tc.wantStored)
			}
		})
	}
}
