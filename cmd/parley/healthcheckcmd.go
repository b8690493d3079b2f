package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/parleyd/parley/httpserve"
)

// cmdHealthcheck asks the daemon on this config whether it is ready: for a
// container's HEALTHCHECK, which has no curl. Exit 0 when /readyz answers
// 200, 1 otherwise.
func cmdHealthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("healthcheck")
	url := fs.String("url", "", "the daemon's address (default: http.ops_listen or http.listen of the config)")
	if err := fs.parse(args, 0); err != nil {
		return err
	}
	target := *url
	if target == "" {
		cfg, _, err := loadConfigFor(*fs.config, "http")
		if err != nil {
			return err
		}
		listen := cfg.HTTP.Listen
		if cfg.HTTP.OpsListen != "" {
			listen = cfg.HTTP.OpsListen
		}
		target = httpserve.LocalURL(listen)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, serverURL(target)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("parley isn't answering at %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("parley at %s is not ready (%d): %s", target, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "ready: %s", body)
	return nil
}
