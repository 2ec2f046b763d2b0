// Package httpserve serves an HTTP handler on a TCP address until told to
// stop: the daemon's status page and the republished source.
package httpserve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
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

// Start listens on listen and serves h until stop is called, which shuts
// the server down, waiting up to 5 seconds for requests in flight (ctx's
// values are kept, its cancellation is not: stop is called after ctx
// ends). addr is the address it listens on. A failure to listen is a
// *ListenError.
func Start(ctx context.Context, listen string, h http.Handler) (stop func(), addr string, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", &ListenError{Addr: listen, Err: err}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, ln.Addr().String(), nil
}
