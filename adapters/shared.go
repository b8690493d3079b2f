package adapters

import (
	"strconv"
	"strings"
)

// The lines a message that shares something other than text or a file
// reads as, the same on every channel: the model is told what was shared
// in words.

// SharedLocation is the line of a shared location; live marks one the
// person shares as they move (its later moves are not messages).
func SharedLocation(lat, lon float64, live bool) string {
	what := "a location"
	if live {
		what = "a live location (where they were when they shared it)"
	}
	return "[shared " + what + ": " + coordinates(lat, lon) + "]"
}

// SharedPlace is the line of a shared place: a location with a name or an
// address.
func SharedPlace(name, address string, lat, lon float64) string {
	return "[shared a place: " + strings.Trim(strings.TrimSpace(name)+", "+strings.TrimSpace(address), ", ") + " (" + coordinates(lat, lon) + ")]"
}

// SharedContact is the line of a shared contact: its name and phone
// numbers.
func SharedContact(name string, phones ...string) string {
	parts := []string{}
	for _, p := range append([]string{name}, phones...) {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "[shared a contact]"
	}
	return "[shared a contact: " + strings.Join(parts, ", ") + "]"
}

// SentSticker is the line of a sticker, with the emoji it stands for.
func SentSticker(emoji string) string {
	if emoji == "" {
		return "[sent a sticker]"
	}
	return "[sent a sticker: " + emoji + "]"
}

// coordinates is a latitude and longitude as people write them.
func coordinates(lat, lon float64) string {
	return strconv.FormatFloat(lat, 'f', 6, 64) + ", " + strconv.FormatFloat(lon, 'f', 6, 64)
}
