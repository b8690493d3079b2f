package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/parleyd/parley/config"
)

// Whatever a part of the code names a field, the log says session, run,
// agent, channel and replica, in both formats, and leaves a group's
// fields as they are.
func TestLogsSpeakOneVocabulary(t *testing.T) {
	var text bytes.Buffer
	log := newLogger(&text, config.Log{Level: "info", Format: "text"}).With("component", "gateway")
	log.Info("reply sent", "session_id", "s1", "run_id", "r1", "agent_id", "main", "adapter", "tg-main", "replica_id", "a1", "ref", "E1")
	for _, want := range []string{"component=gateway", "session=s1", "run=r1", "agent=main", "channel=tg-main", "replica=a1", "ref=E1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text log %q has no %s", text.String(), want)
		}
	}
	if strings.Contains(text.String(), "session_id") || strings.Contains(text.String(), "adapter=") {
		t.Errorf("the text log keeps an old name: %q", text.String())
	}
	var js bytes.Buffer
	newLogger(&js, config.Log{Format: "json"}).Info("turn failed", "session_id", "s2", "adapter", "wa", slogGroup())
	var rec map[string]any
	if err := json.Unmarshal(js.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["session"] != "s2" || rec["channel"] != "wa" || rec["session_id"] != nil {
		t.Errorf("the JSON log: %v", rec)
	}
	if g, _ := rec["detail"].(map[string]any); g["adapter"] != "inner" {
		t.Errorf("a group's field was renamed: %v", rec)
	}
}

func slogGroup() any { return slog.Group("detail", "adapter", "inner") }
