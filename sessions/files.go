package sessions

import (
	"encoding/json"
	"fmt"
)

// PartFile is the part type of a file sent with a user message: Name and
// MediaType as the sender's platform gave them, FileData in Data, and in
// Text what parley read of the file (its text), if anything.
const PartFile = "file"

// PartTurn is the part type that records, on a turn's user message, the
// model and reasoning effort the turn ran with (agent.TurnSettings). It is
// never sent to a model, and counts for nothing in the token estimate.
const PartTurn = "turn"

// FileData is what a file part keeps beyond its name, type and text.
type FileData struct {
	// ID is the platform's reference to the file, to fetch it again.
	ID   string `json:"id,omitempty"`
	Size int64  `json:"size,omitempty"`
	// Note says, for the model, why the file's text is missing or cut
	// ("parley can't read this type of file", "cut at 64 KiB").
	Note string `json:"note,omitempty"`
	// Stored is the name of the file's copy in the session file store
	// (package files), kept with its message so later turns, a replay,
	// a rewind and a branch read the same bytes; "" when it wasn't kept.
	Stored string `json:"stored,omitempty"`
	// Caption, on a file a reply carries (send_file), is the text sent
	// with it.
	Caption string `json:"caption,omitempty"`
}

// FilePart is the part naming a file sent with a message.
func FilePart(name, mediaType string, d FileData, text string) Part {
	data, _ := json.Marshal(d) // plain strings and a number: never fails
	return Part{Type: PartFile, Name: name, MediaType: mediaType, Data: data, Text: text}
}

// File returns a file part's data; ok is false for other parts.
func (p Part) File() (d FileData, ok bool) {
	if p.Type != PartFile {
		return FileData{}, false
	}
	_ = json.Unmarshal(p.Data, &d) // a part stored by hand may lack it
	return d, true
}

// ByteSize is a size for a person: "812 B", "1.2 KB", "3.4 MB".
func ByteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f KB", float64(n)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/(1000*1000))
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1000*1000*1000))
}
