package httpserve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hang bounds every wait of these tests: a limit that does not hold ends
// the test at this bound, not at once.
const hang = time.Minute

func serveWith(t *testing.T, h http.Handler, lim limits) string {
	t.Helper()
	stop, addr, err := start(t.Context(), "127.0.0.1:0", h, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// send dials addr and writes request, raw; the connection closes with the
// test.
func send(t *testing.T, addr, request string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reads c until the server closes it, failing the test if
// it stays open for hang.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(hang))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open", what)
	}
}

func short() limits {
	l := defaultLimits()
	l.header, l.read, l.idle, l.stall = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	return l
}

// TestSlowClientsCut: a client that sends a header but not the body it
// announced, one that keeps a connection idle, and one that stops
// reading a response each lose their connection: none holds the server's
// connection, or a handler, for good.
func TestSlowClientsCut(t *testing.T) {
	t.Run("body never sent", func(t *testing.T) {
		got := make(chan error, 1)
		addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			got <- err
		}), short())
		c := send(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
		select {
		case err := <-got:
			if err == nil {
				t.Error("the handler read a body the client never sent")
			}
		case <-time.After(hang):
			t.Fatal("the handler still waits for the body")
		}
		closedByServer(t, c, "body never sent")
	})
	t.Run("idle", func(t *testing.T) {
		addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }), short())
		c := send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("first request: %v %v, want 200 kept alive", resp, err)
		}
		closedByServer(t, c, "idle")
	})
	t.Run("response not read", func(t *testing.T) {
		got := make(chan error, 1)
		addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 64<<10)
			for written := 0; written < 1<<30; written += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					got <- err
					return
				}
			}
			got <- nil
		}), short())
		send(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-got:
			if err == nil {
				t.Error("a gigabyte written to a client that read none of it")
			}
		case <-time.After(hang):
			t.Fatal("the handler still writes to a client that stopped reading")
		}
	})
}

// TestLongResponseRead: a response much larger than the connection's
// buffers, read as it comes, is not cut by the stall limit: the limit is
// on a write that does not move, not on the response's length.
func TestLongResponseRead(t *testing.T) {
	lim := short()
	lim.stall = 5 * time.Second
	const size = 32 << 20
	addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range size >> 20 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}), lim)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != size {
		t.Fatalf("read %d bytes (%v), want %d", n, err, size)
	}
}

// TestConnectionsBounded: connections past the bound wait to be accepted
// until one closes; all are then served.
func TestConnectionsBounded(t *testing.T) {
	lim := defaultLimits()
	lim.conns = 2
	var in, most atomic.Int32
	entered := make(chan struct{}, 3)
	release := make(chan struct{})
	addr := serveWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := in.Add(1)
		defer in.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Connection", "close")
	}), lim)
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: hang}
			resp, err := client.Get("http://" + addr + "/")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(hang):
			t.Fatal("two clients not served")
		}
	}
	// The third stays outside while two are held: give it every chance
	// to come in.
	select {
	case <-entered:
		t.Fatalf("a third connection served while two are held (bound 2)")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a client got %d, want 200", c)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d requests served at once, bound 2", m)
	}
}
