package agent

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// PartTurn is the part type that records, on each user message a turn
// stores, the model and reasoning effort the turn ran with (Data is a
// TurnSettings): /status and the API show them.
const PartTurn = sessions.PartTurn

// TurnSettings are what a turn ran with.
type TurnSettings struct {
	Model string `json:"model"`
	// ReasoningEffort is low, medium or high; "" for the provider's
	// default (an agent without one, or /think off).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// EffortOff is the session's reasoning effort after /think off: no
// reasoning effort is asked for, whatever the agent's config says.
const EffortOff = "off"

// MetadataEffort is the session metadata key that holds its reasoning
// effort override (off, low, medium or high), as "model" holds its model.
const MetadataEffort = "reasoning_effort"

// SessionModel is a session's model override (its "model" metadata key),
// or "".
func SessionModel(meta json.RawMessage) string { return sessionModel(meta) }

// SessionEffort is a session's reasoning effort override, or "".
func SessionEffort(meta json.RawMessage) string {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(MetadataEffort)) && !bytes.Contains(meta, []byte(`\`)) {
		return ""
	}
	var v struct {
		Effort string `json:"reasoning_effort"`
	}
	if json.Unmarshal(meta, &v) != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(v.Effort))
}

// resolveEffort picks the reasoning effort: the latest per-message
// override, then the session's (off: none), then the agent's.
func resolveEffort(inputs []Input, sess sessions.Session, agentEffort string) string {
	for i := len(inputs) - 1; i >= 0; i-- {
		if e := inputs[i].ReasoningEffort; e != "" {
			return e
		}
	}
	switch e := SessionEffort(sess.Metadata); e {
	case "":
		return agentEffort
	case EffortOff:
		return ""
	default:
		return e
	}
}

// turnPart is the part that records s on a user message.
func turnPart(s TurnSettings) sessions.Part {
	b, _ := json.Marshal(s)
	return sessions.Part{Type: PartTurn, Data: b}
}

// TurnOf is what the turn that stored user message m ran with, if it
// recorded it.
func TurnOf(m sessions.Message) (TurnSettings, bool) {
	for _, p := range m.Parts {
		if p.Type != PartTurn {
			continue
		}
		var s TurnSettings
		if json.Unmarshal(p.Data, &s) == nil {
			return s, true
		}
	}
	return TurnSettings{}, false
}
