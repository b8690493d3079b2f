package adapters

// Health is implemented by adapters whose link to their platform can be
// down while the daemon runs (WhatsApp before it is linked, or after the
// phone logged it out). The daemon shows it in /readyz; an adapter without
// it is taken to be healthy while its Start runs.
type Health interface {
	// Health reports whether the adapter can send and receive now, and a
	// short detail for operators such as "connected", "connecting",
	// "not linked: run `parley whatsapp link --adapter wa`" or "logged out".
	// It is cheap and safe to call from any goroutine.
	Health() (ok bool, detail string)
}
