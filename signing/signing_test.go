package signing

import (
	"strings"
	"testing"
	"time"
)

// A signature made by Sign checks out for its timestamp and body, and for
// nothing else.
func TestSignAndValid(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	body := []byte(`{"build":"b1"}`)
	ts, sig := Sign(secret, time.Unix(1700000000, 0), body)
	if ts != "1700000000" || !strings.HasPrefix(sig, "sha256=") {
		t.Fatalf("Sign = %q, %q", ts, sig)
	}
	msg := append([]byte(ts+"."), body...)
	if !Valid(sig, []byte(secret), msg) {
		t.Fatal("a signature Sign made does not check out")
	}
	for name, c := range map[string]struct {
		header, secret string
		msg            []byte
	}{
		"another body":      {sig, secret, append([]byte(ts+"."), `{"build":"b2"}`...)},
		"another timestamp": {sig, secret, append([]byte("1700000001."), body...)},
		"another secret":    {sig, secret + "x", msg},
		"no prefix":         {strings.TrimPrefix(sig, "sha256="), secret, msg},
		"not hex":           {"sha256=zz", secret, msg},
	} {
		if Valid(c.header, []byte(c.secret), c.msg) {
			t.Errorf("%s: checked out", name)
		}
	}
}
