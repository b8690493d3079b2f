package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/dbutil"
)

// A signature covers the body (and, for hmac, the timestamp) but not the
// delivery id, so a captured request could be sent again under another id
// (or none) while its signature still passes. Each accepted request's
// signature is kept in webhook_replay, in the transaction that accepts it,
// for as long as a copy would pass: a second use is refused.
const (
	// claimReplayQuery takes a signature for one use. A row whose time is
	// up is taken over; one still running makes the insert change nothing.
	claimReplayQuery = `INSERT INTO webhook_replay (hook_id, digest, expires_at) VALUES ($1, $2, $3)
	ON CONFLICT (hook_id, digest) DO UPDATE SET expires_at = excluded.expires_at
	WHERE webhook_replay.expires_at <= $4`

	releaseReplayQuery = `DELETE FROM webhook_replay WHERE hook_id = $1 AND digest = $2`

	sweepReplayQuery = `DELETE FROM webhook_replay WHERE expires_at <= $1`
)

const (
	// GitHubReplayWindow is how long a github hook's signature and
	// X-GitHub-Delivery are refused after their first use: GitHub signs no
	// timestamp, so nothing else bounds a copy's life.
	GitHubReplayWindow = 24 * time.Hour
	// replaySkew covers replicas whose clocks differ a little.
	replaySkew = time.Minute
	// replaySweepEvery is how often expired signatures are deleted.
	replaySweepEvery = time.Minute
)

// errReplay means a signature (or GitHub delivery id) was used before.
var errReplay = errors.New("a replayed request")

// replayKey is one use-once mark of an accepted request.
type replayKey struct {
	digest  string
	expires time.Time
}

// replayKeys are the marks of a request that passed h's auth: the MAC it
// carries (decoded, so a copy with its hex in other letters is the same
// one) and, for github, its X-GitHub-Delivery. A token hook's request has
// none: its bearer token is the same on every request.
func (s *Server) replayKeys(h config.Hook, hdr http.Header) []replayKey {
	now := s.opts.Now()
	switch h.Auth {
	case "github":
		keys := []replayKey{}
		if mac, ok := decodeSignature(hdr.Get("X-Hub-Signature-256")); ok {
			keys = append(keys, replayKey{digest: "sig:" + hashHex(mac), expires: now.Add(GitHubReplayWindow)})
		}
		if id := strings.TrimSpace(hdr.Get("X-GitHub-Delivery")); id != "" {
			keys = append(keys, replayKey{digest: "github-delivery:" + hashHex([]byte(id)), expires: now.Add(GitHubReplayWindow)})
		}
		return keys
	case "hmac":
		mac, ok := decodeSignature(hdr.Get("X-Parley-Signature"))
		secs, err := strconv.ParseInt(hdr.Get("X-Parley-Timestamp"), 10, 64)
		if !ok || err != nil {
			return nil
		}
		// A copy passes until its timestamp is ReplayWindow old.
		return []replayKey{{digest: "sig:" + hashHex(mac), expires: time.Unix(secs, 0).Add(ReplayWindow + replaySkew)}}
	}
	return nil
}

// claimReplays marks keys used, in the transaction that accepts the
// delivery; errReplay if one was used before and its time is not up.
func (s *Server) claimReplays(ctx context.Context, q dbutil.Querier, hookID string, keys []replayKey) error {
	now := dbutil.Millis(s.opts.Now())
	for _, k := range keys {
		res, err := q.ExecContext(ctx, claimReplayQuery, hookID, k.digest, dbutil.Millis(k.expires), now)
		if err != nil {
			return fmt.Errorf("record the request's signature: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errReplay
		}
	}
	return nil
}

// releaseReplays frees the marks of a delivery that was recorded but then
// not taken, so the sender's retry of the same request is not refused.
func (s *Server) releaseReplays(ctx context.Context, hookID string, keys []replayKey) {
	for _, k := range keys {
		if _, err := s.opts.DB.Write().ExecContext(ctx, releaseReplayQuery, hookID, k.digest); err != nil {
			s.opts.Log.WarnContext(ctx, "free a failed webhook request's signature", "hook", hookID, "error", err)
		}
	}
}

// sweepReplays deletes the marks whose time is up.
func (s *Server) sweepReplays(ctx context.Context) error {
	if _, err := s.opts.DB.Write().ExecContext(ctx, sweepReplayQuery, dbutil.Millis(s.opts.Now())); err != nil {
		return fmt.Errorf("delete expired webhook signatures: %w", err)
	}
	return nil
}

// sweepLoop runs sweepReplays every replaySweepEvery until ctx ends.
func (s *Server) sweepLoop(ctx context.Context) {
	tick := time.NewTicker(replaySweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if len(*s.hooks.Load()) == 0 {
				continue // nothing marked since there were hooks is left past its time
			}
			if err := s.sweepReplays(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.WarnContext(ctx, "webhook signatures not swept", "error", err)
			}
		}
	}
}

// decodeSignature is the MAC of a "sha256=<hex>" header.
func decodeSignature(header string) ([]byte, bool) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return nil, false
	}
	mac, err := hex.DecodeString(hexSig)
	return mac, err == nil
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
