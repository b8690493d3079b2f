package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/parleyd/parley/mcptools"
	"github.com/parleyd/parley/secret"
	"github.com/parleyd/parley/tools"
)

// cmdMCP runs parley mcp ls or parley mcp serve.
func cmdMCP(ctx context.Context, args []string, s streams) error {
	if args[0] == "serve" { // dispatch has checked it against the command table
		return cmdMCPServe(ctx, args[1:], s.in, s.out, s.err)
	}
	return cmdMCPList(ctx, args, s.out)
}

// cmdMCPList shows the MCP servers of the config: each is started, listed
// and stopped.
func cmdMCPList(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("mcp ls")
	asJSON := fs.Bool("json", false, "print the servers as JSON")
	cfg, err := fs.load(args[1:], 0, "mcp")
	if err != nil {
		return err
	}
	if len(cfg.MCP.Servers) == 0 {
		fmt.Fprintln(stdout, "no MCP servers; add them under mcp.servers in the config")
		return nil
	}
	if err := resolveSecrets(ctx, cfg); err != nil {
		return err
	}
	m := mcptools.New(cfg.MCP.Servers, tools.NewRegistry(), slog.New(slog.DiscardHandler))
	m.SetScrubber(secret.NewScrubber(cfg.SecretValues()...))
	defer m.Close()
	m.Start(ctx)
	st := m.Statuses()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	w := newTable(stdout, "SERVER\tSTATE\tTOOLS")
	for _, s := range st {
		detail := strings.Join(s.Tools, ", ")
		if s.Error != "" {
			detail = s.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.ID, s.State, detail)
	}
	return w.Flush()
}
