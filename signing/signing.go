// Package signing makes and checks the signatures on parley's HTTP
// messages: the incoming webhooks' and the reply callbacks' alike,
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)), with the
// timestamp in Unix seconds. It is a leaf, so the API signs callbacks
// without importing the webhooks.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Sign is the X-Parley-Timestamp and X-Parley-Signature values for a body
// sent at ts.
func Sign(secret string, ts time.Time, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(body)
	return timestamp, "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Valid checks a "sha256=<hex>" header against HMAC-SHA256(secret, msg),
// in constant time.
func Valid(header string, secret, msg []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(msg)
	return hmac.Equal(got, mac.Sum(nil))
}
