package acpserve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// InMemory serves h to the HTTP client it returns over in-memory
// connections: the API of a daemon in this process, reached without a
// port anyone else could. stop ends the server and its connections.
func InMemory(h http.Handler) (c *http.Client, stop func()) {
	ln := &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	c = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return ln.dial(ctx) },
		// Each request holds a connection for as long as its response
		// streams (an event stream for a whole turn).
		MaxIdleConnsPerHost: 4,
	}}
	return c, func() {
		_ = srv.Close()
		<-served
		c.CloseIdleConnections()
	}
}

// errClosed is a dial after the server stopped.
var errClosed = errors.New("the in-process API is stopped")

// memListener hands the server one end of each net.Pipe a dial makes.
type memListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, errClosed
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "parley-api" }
