package whatsapp

import (
	"log/slog"
	"strings"
	"testing"
)

func TestLoggerBridge(t *testing.T) {
	logs := &syncBuffer{}
	l := newLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Warnf("failed to send keepalive: %v", "timeout")
	l.Sub("Socket").Errorf("frame %d dropped", 7)
	l.Infof("chatter")
	l.Debugf("more chatter")
	l.Sub("Send").Errorf("<message secret>")
	l.Sub("QRChannel").Warnf("2@qr-secret")
	s := logs.String()
	for _, want := range []string{
		`level=WARN msg=whatsmeow module=whatsmeow detail="failed to send keepalive: timeout"`,
		`level=ERROR msg=whatsmeow module=whatsmeow/Socket detail="frame 7 dropped"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("log lacks %s:\n%s", want, s)
		}
	}
	for _, never := range []string{"chatter", "secret"} {
		if strings.Contains(s, never) {
			t.Errorf("log has %q:\n%s", never, s)
		}
	}
}

func TestQuoteCacheKeepsTheLatest(t *testing.T) {
	q := newQuoteCache(2)
	q.put("c", "1", quote{text: "one"})
	q.put("c", "2", quote{text: "two"})
	q.put("c", "2", quote{text: "two again"})
	q.put("d", "1", quote{text: "other chat"})
	if _, ok := q.get("c", "1"); ok {
		t.Fatal("the oldest was kept")
	}
	if v, ok := q.get("c", "2"); !ok || v.text != "two again" {
		t.Fatalf("c/2 = %+v, %v", v, ok)
	}
	if v, ok := q.get("d", "1"); !ok || v.text != "other chat" {
		t.Fatalf("d/1 = %+v, %v", v, ok)
	}
}
