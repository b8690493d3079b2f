package main

import (
	"os"
	"strings"

	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/config"
	"github.com/parleyd/parley/httpserve"
	"github.com/parleyd/parley/runfile"
)

// runningDaemon is a client of the daemon running on cfg, if one runs (its
// run file names its address) or server names one; token defaults to
// $PARLEY_API_TOKEN, then the config's first API token.
func runningDaemon(cfg *config.Config, server, token string) (*client.Client, bool) {
	if server == "" {
		r, ok := runfile.Read(cfg)
		if !ok {
			return nil, false
		}
		server = r.Listen
	}
	if token == "" {
		token = os.Getenv("PARLEY_API_TOKEN")
	}
	if token == "" && len(cfg.HTTP.Tokens) > 0 {
		token = cfg.HTTP.Tokens[0].Reveal()
	}
	return &client.Client{Base: serverURL(server), Token: token}, true
}

// lockingDaemon is a client of the daemon that holds cfg's database, at
// the address its run file records or, from an older one, its configured
// address.
func lockingDaemon(cfg *config.Config, token string) *client.Client {
	if c, ok := runningDaemon(cfg, "", token); ok {
		return c
	}
	c, _ := runningDaemon(cfg, cfg.HTTP.Listen, token)
	return c
}

// serverURL is a --server value or a recorded address as a URL.
func serverURL(server string) string {
	server = strings.TrimRight(server, "/")
	if strings.HasPrefix(server, "http://") || strings.HasPrefix(server, "https://") {
		return server
	}
	return httpserve.LocalURL(server)
}
