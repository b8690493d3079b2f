package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyd/parley/adapters"
	"github.com/parleyd/parley/client"
	"github.com/parleyd/parley/daemon"
	"github.com/parleyd/parley/dbutil"
	"github.com/parleyd/parley/mcpserve"
)

// cmdMCPServe serves parley to an MCP client over stdio: in process on the
// configured database, or in front of the daemon that runs on this config
// (its run file says where) or that --server names, through its /mcp.
func cmdMCPServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("mcp serve")
	server := fs.String("server", "", "pass the calls to a running parley at this address (default: the one this config's daemon records, if it runs)")
	token := fs.String("token", "", "an API token of that daemon (default: $PARLEY_API_TOKEN, then the config's first)")
	cfg, err := fs.load(args, 0)
	if err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok && f == os.Stdout {
		// Standard output carries only MCP messages: anything else
		// written there (by a library, say) goes to standard error.
		os.Stdout = os.Stderr
		defer func() { os.Stdout = f }()
	}
	transport := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	log := newLogger(stderr, cfg.Log)
	if c, ok := runningDaemon(cfg, *server, *token); ok {
		return forwardMCP(ctx, c, transport, stderr)
	}
	d, err := daemon.New(ctx, cfg, log, daemon.WithChannels(map[adapters.ID]adapters.Adapter{mcpserve.AdapterID: mcpserve.Channel{}}),
		daemon.WithConfigPath(fs.used), daemon.WithVersion(version()))
	if errors.Is(err, dbutil.ErrLocked) {
		// A daemon holds the database: serve in front of it.
		return forwardMCP(ctx, lockingDaemon(cfg, *token), transport, stderr)
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		return err
	}
	log.InfoContext(ctx, "serving MCP on standard input and output", "version", version())
	serveErr := d.MCPServer().Run(ctx, transport)
	if errors.Is(serveErr, context.Canceled) || errors.Is(serveErr, io.EOF) {
		serveErr = nil // the client left, or a signal
	}
	return errors.Join(serveErr, d.Stop(context.WithoutCancel(ctx)))
}

// forwardMCP serves the running daemon c's MCP tools on transport, each
// call passed to its /mcp.
func forwardMCP(ctx context.Context, c *client.Client, transport mcp.Transport, stderr io.Writer) error {
	if c.Token == "" {
		return errors.New("a parley runs on this config; serving in front of it needs an API token: set http.tokens, or pass --token or PARLEY_API_TOKEN")
	}
	fmt.Fprintf(stderr, "a parley runs on this config; passing MCP calls to %s/mcp\n", c.Base)
	f, err := mcpserve.Dial(ctx, c.Base+"/mcp", c.Token, version())
	if err != nil {
		return fmt.Errorf("%w\ncheck that the daemon runs, that the token is one of its http.tokens and that its http.mcp is not false", err)
	}
	defer f.Close()
	srv, err := f.Server(ctx, version())
	if err != nil {
		return err
	}
	if err := srv.Run(ctx, transport); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// nopWriteCloser is standard output as the transport's writer: closing
// the MCP connection leaves it open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
