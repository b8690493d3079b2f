package api

import (
	"net/http"
	"time"
)

// refuseBody is for a request answered without reading its body (an
// unauthenticated one): the answer doesn't wait for the body, and the
// connection is closed after it, so a slow sender holds nothing.
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	// What has already arrived is still read (briefly), so the close
	// doesn't reset the connection under a client reading its answer.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(100 * time.Millisecond))
}
