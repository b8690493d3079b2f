package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// hopWindow is how far a passed request's time may be from the
// receiver's: the hop is made at once, so a wide margin only allows for
// clocks that disagree.
const hopWindow = time.Minute

// SignHop is the proof, for a request this replica passes to another,
// that a replica passed it: "<replica id> <unix seconds> <hmac>", the
// HMAC-SHA256 of the method, path and time under this replica's own key,
// which only the replicas read (from the database).
func (m *Member) SignHop(method, path string) string {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	return m.id + " " + ts + " " + hopMAC(m.hopKey, method, path, ts)
}

func hopMAC(key, method, path, ts string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(method + "\n" + path + "\n" + ts))
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifyHop reports whether proof (SignHop's) shows that a live replica
// passed this request (method, path) on just now. Anything else, a
// client's own header among them, is no proof.
func (m *Member) VerifyHop(ctx context.Context, proof, method, path string) bool {
	fields := strings.Fields(proof)
	if len(fields) != 3 {
		return false
	}
	from, ts, sig := fields[0], fields[1], fields[2]
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(secs, 0)).Abs() > hopWindow {
		return false
	}
	key, err := m.hopKeyOf(ctx, from)
	if err != nil || key == "" {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(hopMAC(key, method, path, ts)))
}

// hopKeyOf is the hop key of the live replica id ("" if none).
func (m *Member) hopKeyOf(ctx context.Context, id string) (string, error) {
	if id == m.id {
		return m.hopKey, nil
	}
	m.hopMu.Lock()
	key, ok := m.hopKeys[id]
	m.hopMu.Unlock()
	if ok {
		if peers := m.peers.Load(); peers != nil {
			if _, live := (*peers)[id]; live {
				return key, nil
			}
		}
	}
	err := m.db.Read().QueryRowContext(ctx, hopKeyQuery, id).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the hop key of replica %s: %w", id, err)
	}
	m.hopMu.Lock()
	if m.hopKeys == nil || len(m.hopKeys) >= 1000 {
		m.hopKeys = map[string]string{}
	}
	m.hopKeys[id] = key
	m.hopMu.Unlock()
	return key, nil
}
