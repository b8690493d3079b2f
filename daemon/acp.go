package daemon

import "net/http"

// APIHandler is the /v1 API over this daemon, with the tokens of the
// config it was built from, for a front door in this process that speaks
// to parley as an API client does (`parley acp` in process reaches it
// through an in-memory connection, never a port).
func (d *Daemon) APIHandler() http.Handler { return d.apiHandler() }
