package api

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// messagePos is a place in a session's history, which is ordered by seq,
// an archived message before the live one sharing its seq (the summary
// that replaced it), a message before a summary sharing its seq.
type messagePos struct {
	set     bool
	seq     int64
	live    int
	summary int
}

func posOf(m sessions.Message) messagePos {
	live := 1
	if m.Archived() {
		live = 0
	}
	summary := 0
	if m.Summary {
		summary = 1
	}
	return messagePos{set: true, seq: m.Seq, live: live, summary: summary}
}

// before reports whether p comes before m (always, when p is unset).
func (p messagePos) before(m sessions.Message) bool {
	if !p.set {
		return true
	}
	q := posOf(m)
	if p.seq != q.seq {
		return p.seq < q.seq
	}
	if p.live != q.live {
		return p.live < q.live
	}
	return p.summary < q.summary
}

const messageCursorPrefix = "m1:"

func encodeMessageCursor(m sessions.Message) string {
	p := posOf(m)
	return base64.RawURLEncoding.EncodeToString([]byte(messageCursorPrefix + strconv.FormatInt(p.seq, 10) + ":" + strconv.Itoa(p.live) + ":" + strconv.Itoa(p.summary)))
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
	f := strings.Split(strings.TrimPrefix(string(b), messageCursorPrefix), ":")
	if len(f) != 3 {
		return messagePos{}, bad
	}
	seq, err1 := strconv.ParseInt(f[0], 10, 64)
	live, err2 := strconv.Atoi(f[1])
	summary, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || live < 0 || live > 1 || summary < 0 || summary > 1 {
		return messagePos{}, bad
	}
	return messagePos{set: true, seq: seq, live: live, summary: summary}, nil
}
