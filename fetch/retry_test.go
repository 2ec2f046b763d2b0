package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRetryReason(t *testing.T) {
	const u = "http://example.org/cl.xml"
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"transport", fmt.Errorf("GET %s: dial tcp 127.0.0.1:9: connect: connection refused", u), "dial tcp 127.0.0.1:9: connect: connection refused"},
		{"status", &StatusError{URL: u, StatusCode: http.StatusServiceUnavailable, RetryAfter: 2 * time.Second}, "HTTP 503 Service Unavailable (Retry-After 2s)"},
		{"redirected", fmt.Errorf("GET %s (at http://example.org/b): EOF", u), "(at http://example.org/b): EOF"},
		{"range", fmt.Errorf("GET %s (bytes=0-9): unexpected EOF after 3 bytes", u), "(bytes=0-9): unexpected EOF after 3 bytes"},
		{"another URL", &StatusError{URL: "http://mirror.example.org/cl.xml", StatusCode: http.StatusBadGateway}, "GET http://mirror.example.org/cl.xml: HTTP 502 Bad Gateway"},
		{"a longer URL", fmt.Errorf("GET %s.gz: EOF", u), "GET " + u + ".gz: EOF"},
		{"no prefix", errors.New("connection reset by peer"), "connection reset by peer"},
		{"nothing after the URL", fmt.Errorf("GET %s", u), "GET " + u},
		{"no error", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Retry{URL: u, Err: tt.err}).Reason(); got != tt.want {
				t.Errorf("Reason() = %q, want %q", got, tt.want)
			}
		})
	}
}

// retryLog records what OnRetry is told.
type retryLog struct {
	mu    sync.Mutex
	calls []Retry
}

func (l *retryLog) note(r Retry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, r)
}

func (l *retryLog) get() []Retry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Retry(nil), l.calls...)
}

// TestOnRetry: every retry of Open, Probe and a range read is told to
// OnRetry before the wait, with the attempt about to be made, the most
// attempts, the wait and why; the log then holds no warning.
func TestOnRetry(t *testing.T) {
	data := testData(100, 3)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n%3 < 2 {
			status(w, http.StatusServiceUnavailable, "")
			return
		}
		content(w, r, data, `"v1"`, time.Time{})
	})
	for _, tt := range []struct {
		name string
		do   func(c *Client) error
	}{
		{"open", func(c *Client) error { _, _, err := readAll(t.Context(), c, srv.URL); return err }},
		{"probe", func(c *Client) error { _, _, _, err := c.Probe(t.Context(), srv.URL); return err }},
		{"range", func(c *Client) error {
			_, err := c.ReaderAt(t.Context(), srv.URL, int64(len(data)), `"v1"`).ReadAt(make([]byte, 10), 0)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var rl retryLog
			o := testOptions()
			o.OnRetry = rl.note
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			c, sl := newTestClient(t, o)
			if err := tt.do(c); err != nil {
				t.Fatal(err)
			}
			calls, waits := rl.get(), sl.get()
			if len(calls) != 2 || len(waits) != 2 {
				t.Fatalf("OnRetry told %d times (%+v), %d waits; want 2", len(calls), calls, len(waits))
			}
			for i, r := range calls {
				if r.URL != srv.URL || r.Attempt != i+2 || r.Attempts != 4 || r.Wait != waits[i] ||
					r.Reason() != "HTTP 503 Service Unavailable" {
					t.Errorf("retry %d: %+v (reason %q), want attempt %d of 4 of %s in %v, HTTP 503", i, r, r.Reason(), i+2, srv.URL, waits[i])
				}
			}
			if logs.Len() > 0 {
				t.Errorf("with OnRetry, the log holds warnings:\n%s", logs.String())
			}
		})
	}
}

// TestRetryWarning: without OnRetry, each retry is a warning naming the URL
// once, with why it failed.
func TestRetryWarning(t *testing.T) {
	// A server that closes every connection unanswered: a transport
	// failure a retry may mend (a closing connection is not retried).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	closing := srv.URL + "/x"
	var logs bytes.Buffer
	o := testOptions()
	o.Retries = 2
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, _ := newTestClient(t, o)
	if _, err := c.Open(t.Context(), closing); err == nil {
		t.Fatal("no error from a server closing connections")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", len(lines), logs.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "EOF") ||
			!strings.Contains(l, fmt.Sprintf("attempt=%d of=3", i+2)) || strings.Count(l, closing) != 1 {
			t.Errorf("warning %d = %s", i, l)
		}
	}
}
