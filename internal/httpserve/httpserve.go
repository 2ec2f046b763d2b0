// Package httpserve serves an HTTP handler on a TCP address until told to
// stop: the daemon's status page and the republished source.
package httpserve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// ListenError is a failure to listen on the address given: a setting of
// the caller's, not a failure of the server.
type ListenError struct {
	Addr string
	Err  error
}

// Error names the address and the cause.
func (e *ListenError) Error() string { return fmt.Sprintf("%s: %v", e.Addr, e.Err) }

// Unwrap returns the cause.
func (e *ListenError) Unwrap() error { return e.Err }

// limits bound what one client, or many, can hold of a server.
type limits struct {
	// header: to send a request's header; read: its header and body.
	header, read time.Duration
	// idle: a kept-alive connection waiting for its next request.
	idle time.Duration
	// stall: a response the client stopped reading (each write must
	// progress within it; a long download that progresses goes on).
	stall time.Duration
	// conns: connections served at once; more wait to be accepted.
	conns int
	// headerBytes: a request's header.
	headerBytes int
}

// defaultLimits are the limits Start serves with.
func defaultLimits() limits {
	return limits{
		header:      10 * time.Second,
		read:        time.Minute,
		idle:        2 * time.Minute,
		stall:       time.Minute,
		conns:       512,
		headerBytes: 64 << 10,
	}
}

// Start listens on listen and serves h until stop is called, which shuts
// the server down, waiting up to 5 seconds for requests in flight (ctx's
// values are kept, its cancellation is not: stop is called after ctx
// ends). addr is the address it listens on. A failure to listen is a
// *ListenError. A client is given 10 seconds to send a request's header
// and a minute for the whole request; a connection is closed after two
// minutes idle, or when a response has not moved for a minute (a client
// that stopped reading); 512 connections are served at once.
func Start(ctx context.Context, listen string, h http.Handler) (stop func(), addr string, err error) {
	return start(ctx, listen, h, defaultLimits())
}

func start(ctx context.Context, listen string, h http.Handler, lim limits) (stop func(), addr string, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", &ListenError{Addr: listen, Err: err}
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.header,
		ReadTimeout:       lim.read,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    lim.headerBytes,
	}
	served := netutil.LimitListener(stallListener{Listener: ln, stall: lim.stall}, lim.conns)
	go func() { _ = srv.Serve(served) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, ln.Addr().String(), nil
}

// stallListener accepts connections whose every write must be taken by
// the client within stall.
type stallListener struct {
	net.Listener
	stall time.Duration
}

func (l stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return stallConn{Conn: c, stall: l.stall}, nil
}

// stallConn is a connection whose writes each have stall to complete: a
// response is cut when its client stops reading, not when it is long.
type stallConn struct {
	net.Conn
	stall time.Duration
}

func (c stallConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.stall)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
