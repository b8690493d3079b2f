package acpserve

import "time"

// WithStreamIdle is o with responses counted as lost after d of silence.
func WithStreamIdle(o Options, d time.Duration) Options {
	o.streamIdle = d
	return o
}
