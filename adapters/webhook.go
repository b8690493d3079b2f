package adapters

import "net/http"

// WebhookHandler is implemented by adapters that take their platform's
// updates over HTTP on parley's own server (Telegram in webhook mode). The
// daemon mounts each one on its mux with mux.Handle(pattern, h); an empty
// pattern means the adapter is not taking webhooks and there is nothing
// to mount.
type WebhookHandler interface {
	// Webhook returns a net/http ServeMux pattern, such as
	// "POST /telegram/tg-main", and the handler to serve it.
	Webhook() (pattern string, h http.Handler)
}
