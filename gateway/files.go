package gateway

import (
	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/sessions"
)

// fileParts name a message's files, as stored with a group message kept
// as context: the model sees that they were sent, though no turn read
// them.
func fileParts(files []adapters.FileRef) []sessions.Part {
	var parts []sessions.Part
	for _, f := range files {
		parts = append(parts, sessions.FilePart(f.Name, f.MediaType, sessions.FileData{ID: f.ID, Size: f.Size,
			Note: "sent in the group before the assistant was addressed; not read"}, ""))
	}
	return parts
}
