//go:build !linux

package metrics

import "time"

// started stands in for the process's start time where there is no /proc.
var started = time.Now()

// writeProcess writes what parley can tell without /proc: its start time.
func writeProcess(e *exposer) {
	e.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(started.UnixNano())/1e9)
}
