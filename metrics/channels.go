package metrics

import (
	"context"
	"time"

	"github.com/parleyd/parley/adapters"
)

// WatchChannels samples each channel's health every so often and counts
// its turns: healthy to unhealthy is an error, back again a reconnect.
// Channels that can't say how they are are not counted here; their failed
// sends are, by the sender. A channel another replica runs (elsewhere)
// is no error.
func (m *Metrics) WatchChannels(ctx context.Context, every time.Duration, channels map[adapters.ID]adapters.Adapter, elsewhere func(adapters.ID) bool) {
	healthy := map[adapters.ID]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for id, a := range channels {
			h, ok := a.(interface{ Health() (bool, string) })
			if !ok {
				continue
			}
			if elsewhere != nil && elsewhere(id) {
				delete(healthy, id) // handed over, or standing by: no error
				continue
			}
			now, _ := h.Health()
			was, seen := healthy[id]
			switch {
			case seen && was && !now:
				m.AdapterError(string(id))
			case seen && !was && now:
				m.Reconnect(string(id))
			}
			healthy[id] = now
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
