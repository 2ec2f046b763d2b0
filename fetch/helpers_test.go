package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// handlerFunc serves the n-th request (from 0) a test server receives.
type handlerFunc func(n int, w http.ResponseWriter, r *http.Request)

// server is an httptest server on 127.0.0.1 that records request headers.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []http.Header
}

func newServer(t testing.TB, h handlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.reqs)
		hdr := r.Header.Clone()
		hdr.Set("X-Test-Path", r.URL.Path)
		s.reqs = append(s.reqs, hdr)
		s.mu.Unlock()
		h(n, w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// requests returns the headers of the requests received so far.
func (s *server) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.reqs...)
}

// testData returns n deterministic pseudo-random bytes.
func testData(n int, seed byte) []byte {
	r := rand.NewChaCha8([32]byte{seed})
	b := make([]byte, n)
	r.Read(b)
	return b
}

// content serves data with http.ServeContent (Range and If-Range aware,
// Accept-Ranges: bytes); etag and lm are sent when set.
func content(w http.ResponseWriter, r *http.Request, data []byte, etag string, lm time.Time) {
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", lm, bytes.NewReader(data))
}

// full serves data with 200 and a Content-Length, ignoring Range.
func full(w http.ResponseWriter, data []byte, etag string) {
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// chunked serves data without a Content-Length, flushing in pieces.
func chunked(w http.ResponseWriter, data []byte) {
	w.WriteHeader(http.StatusOK)
	for len(data) > 0 {
		k := min(len(data), 10000)
		if _, err := w.Write(data[:k]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		data = data[k:]
	}
}

var errCut = errors.New("connection cut by the test")

// cutWriter passes the first left body bytes through, then hijacks the
// connection and closes it: with an RST when rst, else with a FIN.
type cutWriter struct {
	http.ResponseWriter
	left int
	rst  bool
	done bool
}

// cut returns w wrapped so the body is cut after k bytes.
func cut(w http.ResponseWriter, k int, rst bool) http.ResponseWriter {
	return &cutWriter{ResponseWriter: w, left: k, rst: rst}
}

// Flush flushes unless the connection is cut.
func (c *cutWriter) Flush() {
	if !c.done {
		c.ResponseWriter.(http.Flusher).Flush()
	}
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.done {
		return 0, errCut
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.ResponseWriter.Write(p)
	c.left -= n
	if err != nil || c.left > 0 {
		return n, err
	}
	c.done = true
	c.ResponseWriter.(http.Flusher).Flush()
	conn, _, err := c.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return n, err
	}
	if tc, ok := conn.(*net.TCPConn); ok && c.rst {
		// Give loopback a moment to deliver what was written; a linger
		// of 0 then turns Close into a reset.
		time.Sleep(20 * time.Millisecond)
		tc.SetLinger(0)
	}
	conn.Close()
	return n, errCut
}

// stall sends the first k bytes of data (announcing all of it), then
// stops writing until the client goes away (at most 5 s).
func stall(w http.ResponseWriter, r *http.Request, data []byte, k int, etag string) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data[:k])
	w.(http.Flusher).Flush()
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// status answers code with an optional Retry-After.
func status(w http.ResponseWriter, code int, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	http.Error(w, http.StatusText(code), code)
}

// sleepLog replaces Client.sleep, recording the waits without sleeping.
type sleepLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepLog) get() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// testOptions are fast options for tests.
func testOptions() Options {
	return Options{
		UserAgent:      "rsharvest/test",
		Retries:        3,
		BackoffInitial: time.Millisecond,
		BackoffMax:     2 * time.Millisecond,
		StallTimeout:   5 * time.Second,
		Timeout:        5 * time.Second,
	}
}

// newTestClient returns a client whose sleeps are only recorded.
func newTestClient(t testing.TB, o Options) (*Client, *sleepLog) {
	t.Helper()
	c := New(o)
	sl := &sleepLog{}
	c.sleep = sl.sleep
	if tr, ok := c.opts.Transport.(*http.Transport); ok {
		t.Cleanup(tr.CloseIdleConnections)
	}
	return c, sl
}

// readAll opens url and reads the whole body.
func readAll(ctx context.Context, c *Client, url string) (*Body, []byte, error) {
	b, err := c.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer b.Close()
	data, err := io.ReadAll(b)
	return b, data, err
}

// fakeTransport answers requests without a network.
type fakeTransport func(*http.Request) (*http.Response, error)

func (f fakeTransport) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ http.RoundTripper = fakeTransport(nil)

func rangeHeader(off int) string { return fmt.Sprintf("bytes=%d-", off) }
