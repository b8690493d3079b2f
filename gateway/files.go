package gateway

import (
	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/sessions"
)

// fileParts name a message's files, as stored with a message kept without
// a turn (a group message as context, a voice note nobody could hear): the
// model sees that they were sent, though no turn read them.
func fileParts(in adapters.Inbound) []sessions.Part {
	var parts []sessions.Part
	for _, f := range in.Files {
		note := "sent in the group before the assistant was addressed; not read"
		switch {
		case adapters.IsSpeech(f) && in.VoiceFailed != "":
			note = VoiceFailedNote
		case adapters.IsSpeech(f) && in.Transcribed:
			note = TranscribedNote
		}
		parts = append(parts, sessions.FilePart(f.Name, f.MediaType, sessions.FileData{ID: f.ID, Size: f.Size, Note: note}, ""))
	}
	return parts
}

// What the model is told of a voice note, beside its file part.
const (
	TranscribedNote = "a voice note: the message's text is a machine transcript of it and may hold mistakes"
	VoiceFailedNote = "a voice note parley couldn't transcribe"
)
