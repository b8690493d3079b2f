package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/parleyd/parley/config/section"
)

// Defaults of the gateway section.
const (
	DefaultRecovery        = "rerun"
	DefaultQueueCap        = 20
	DefaultDebounce        = 500 * time.Millisecond
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultReplicaLease and DefaultReplicaHeartbeat give failover within
	// about six seconds of a replica's last heartbeat.
	DefaultReplicaLease     = 5 * time.Second
	DefaultReplicaHeartbeat = time.Second
)

// Gateway tunes how messages are queued and answered.
type Gateway struct {
	// Recovery is what to do on start with messages accepted before a crash
	// but never answered: "rerun" answers them, "mark" marks them failed.
	Recovery string `yaml:"recovery"`
	// QueueCap is how many messages may wait per session before the sender
	// is told to wait.
	QueueCap int `yaml:"queue_cap"`
	// Debounce is the window within which a burst of messages is answered as
	// one turn; 0 turns it off.
	Debounce Duration `yaml:"debounce"`
	// ShutdownTimeout is how long running turns get to finish on SIGTERM.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// ReplicaID names this process among replicas sharing one PostgreSQL
	// database. Set, no two live processes may share it; unset, each
	// process gets the host name and a random suffix.
	ReplicaID string `yaml:"replica_id"`
	// ReplicaIDSet reports that the config named the replica.
	ReplicaIDSet bool `yaml:"-"`
	// ReplicaLease is how long a replica stays live without a heartbeat:
	// a survivor takes a dead replica's sessions and channels over within
	// it and one heartbeat. ReplicaHeartbeat is how often a replica renews.
	ReplicaLease     Duration `yaml:"replica_lease"`
	ReplicaHeartbeat Duration `yaml:"replica_heartbeat"`
	// AdvertiseURL is where the other replicas reach this one's API (a
	// request for a session another replica runs is passed to it).
	// Default: http:// and http.listen, with the host name for an
	// unspecified address.
	AdvertiseURL string `yaml:"advertise_url"`
}

// SetDefaults fills in the gateway section's absent settings.
func (g *Gateway) SetDefaults(set section.Set) {
	g.Recovery = section.Normalize(g.Recovery, DefaultRecovery)
	section.Default(&g.QueueCap, set, "queue_cap", DefaultQueueCap)
	section.Default(&g.Debounce, set, "debounce", Duration(DefaultDebounce))
	section.Default(&g.ShutdownTimeout, set, "shutdown_timeout", Duration(DefaultShutdownTimeout))
	section.Default(&g.ReplicaLease, set, "replica_lease", Duration(DefaultReplicaLease))
	section.Default(&g.ReplicaHeartbeat, set, "replica_heartbeat", Duration(DefaultReplicaHeartbeat))
	g.ReplicaID = strings.TrimSpace(g.ReplicaID)
	g.ReplicaIDSet = g.ReplicaID != ""
	if g.ReplicaID == "" {
		g.ReplicaID, _ = os.Hostname()
	}
	g.AdvertiseURL = strings.TrimRight(strings.TrimSpace(g.AdvertiseURL), "/")
}

// Check reports the gateway section's problems.
func (g Gateway) Check(r section.Reporter) {
	switch g.Recovery {
	case "rerun", "mark":
	default:
		r.Add("recovery", fmt.Sprintf(`%q is not allowed; use "rerun" (answer messages left unanswered by a crash) `+
			`or "mark" (mark them failed without answering)`, g.Recovery))
	}
	if n := g.QueueCap; n < 1 || n > 1000 {
		r.Add("queue_cap", fmt.Sprintf("%d is out of range; use 1-1000", n))
	}
	if d := g.Debounce; d < 0 || d.Std() > 10*time.Second {
		r.Add("debounce", fmt.Sprintf(`%s is out of range; use a duration from 0 (off) to 10s, such as "500ms"`, d))
	}
	if g.ShutdownTimeout <= 0 {
		r.Add("shutdown_timeout", fmt.Sprintf(`%s is not allowed; use a duration above 0 such as "30s"`, g.ShutdownTimeout))
	}
	if g.ReplicaHeartbeat < Duration(100*time.Millisecond) {
		r.Add("replica_heartbeat", fmt.Sprintf(`%s is too short; use 100ms or more, such as "1s"`, g.ReplicaHeartbeat))
	} else if g.ReplicaLease < 3*g.ReplicaHeartbeat {
		r.Add("replica_lease", fmt.Sprintf(`%s is too short for a heartbeat of %s; use at least three heartbeats, such as "5s" with "1s"`, g.ReplicaLease, g.ReplicaHeartbeat))
	}
	if u := g.AdvertiseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		r.Add("advertise_url", fmt.Sprintf(`%q is not an http:// or https:// URL; give the address other replicas reach this one's API at, such as "http://10.0.0.5:8080"`, u))
	}
}
