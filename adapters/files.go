package adapters

import (
	"mime"
	"path"
	"strings"
)

// IsSpeech reports whether a file is someone talking, to be transcribed:
// audio, or a video marked Spoken (a video note).
func IsSpeech(f FileRef) bool { return f.Spoken || IsAudio(f) }

// IsAudio reports whether a file is audio (a voice note, a recording),
// by its media type or else its name.
func IsAudio(f FileRef) bool {
	typ := strings.ToLower(strings.TrimSpace(f.MediaType))
	if t, _, err := mime.ParseMediaType(typ); err == nil {
		typ = t
	}
	if strings.HasPrefix(typ, "audio/") {
		return true
	}
	if typ != "" && typ != "application/octet-stream" {
		return false
	}
	switch strings.ToLower(path.Ext(f.Name)) {
	case ".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".flac", ".webm", ".aac", ".amr":
		return true
	}
	return false
}
