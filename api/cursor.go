package api

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// messagePos is a place in a session's history, which is ordered by seq,
// an archived message before the live one sharing its seq (the summary
// that replaced it).
type messagePos struct {
	set  bool
	seq  int64
	live int
}

func posOf(m sessions.Message) messagePos {
	live := 1
	if m.Archived() {
		live = 0
	}
	return messagePos{set: true, seq: m.Seq, live: live}
}

// before reports whether p comes before m (always, when p is unset).
func (p messagePos) before(m sessions.Message) bool {
	if !p.set {
		return true
	}
	q := posOf(m)
	return p.seq < q.seq || (p.seq == q.seq && p.live < q.live)
}

const messageCursorPrefix = "m1:"

func encodeMessageCursor(m sessions.Message) string {
	p := posOf(m)
	return base64.RawURLEncoding.EncodeToString([]byte(messageCursorPrefix + strconv.FormatInt(p.seq, 10) + ":" + strconv.Itoa(p.live)))
}

func decodeMessageCursor(c string) (messagePos, error) {
	if c == "" {
		return messagePos{}, nil
	}
	bad := badRequest(sessions.ErrBadCursor.Error())
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), messageCursorPrefix) {
		return messagePos{}, bad
	}
	seqS, liveS, ok := strings.Cut(strings.TrimPrefix(string(b), messageCursorPrefix), ":")
	seq, err1 := strconv.ParseInt(seqS, 10, 64)
	live, err2 := strconv.Atoi(liveS)
	if !ok || err1 != nil || err2 != nil || (live != 0 && live != 1) {
		return messagePos{}, bad
	}
	return messagePos{set: true, seq: seq, live: live}, nil
}
