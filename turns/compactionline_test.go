package turns

import (
	"strings"
	"testing"

	"github.com/parleyd/parley/agent"
)

// The line a person reads after /compact gives the context's size before
// and after in plain numbers.
func TestCompactionLineSaysTheSizesInDecimal(t *testing.T) {
	line := CompactionLine(agent.CompactionResult{Compacted: true, Summarized: 12, TokensBefore: 9000, TokensAfter: 1000,
		KeptTurns: 2, KeptMessages: 4, KeptFrom: "what's next?"})
	if !strings.Contains(line, "~9000 tokens of context down to ~1000.") {
		t.Fatalf("CompactionLine = %q", line)
	}
	if !strings.Contains(line, `Kept the last 2 turns (4 messages) as they are, from "what's next?".`) {
		t.Fatalf("CompactionLine = %q", line)
	}
}
