package api

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/parleyd/parley/sessions"
)

// A message cursor is a sessions.Position: "m1:<seq>:<live>:<summary>",
// base64url, with live 0 for an archived message and summary 0 or 1.
const messageCursorPrefix = "m1:"

func encodeMessageCursor(m sessions.Message) string {
	p := sessions.PositionOf(m)
	live, summary := 1, 0
	if p.Archived {
		live = 0
	}
	if p.Summary {
		summary = 1
	}
	return base64.RawURLEncoding.EncodeToString([]byte(messageCursorPrefix + strconv.FormatInt(p.Seq, 10) + ":" +
		strconv.Itoa(live) + ":" + strconv.Itoa(summary)))
}

// decodeMessageCursor is the position c names, nil for none.
func decodeMessageCursor(c string) (*sessions.Position, error) {
	if c == "" {
		return nil, nil
	}
	bad := badRequest(sessions.ErrBadCursor.Error())
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), messageCursorPrefix) {
		return nil, bad
	}
	f := strings.Split(strings.TrimPrefix(string(b), messageCursorPrefix), ":")
	if len(f) != 3 {
		return nil, bad
	}
	seq, err1 := strconv.ParseInt(f[0], 10, 64)
	live, err2 := strconv.Atoi(f[1])
	summary, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil || seq < 0 || live < 0 || live > 1 || summary < 0 || summary > 1 {
		return nil, bad
	}
	return &sessions.Position{Seq: seq, Archived: live == 0, Summary: summary == 1}, nil
}
