package fetch

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

// TestLowSpeed: a body that trickles (a byte every few milliseconds,
// never stalling) is cut once a window of LowSpeedTime received less than
// LowSpeedLimit bytes a second — a temporary failure, not resumed — while
// one at speed, and the same trickle with the cutoff off, are read whole.
func TestLowSpeed(t *testing.T) {
	const size = 400
	trickle := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "400")
		for range size {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	fast := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1<<20))
	})
	tests := []struct {
		name  string
		url   string
		limit int64
		slow  bool
	}{
		{"a trickle", trickle.URL, 10_000, true},
		{"at speed", fast.URL, 10_000, false},
		{"a trickle with the cutoff off", trickle.URL, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.LowSpeedLimit, o.LowSpeedTime = tc.limit, 50*time.Millisecond
			c, _ := newTestClient(t, o)
			n0 := len(trickle.requests())
			_, data, err := readAll(t.Context(), c, tc.url)
			if !tc.slow {
				if err != nil {
					t.Fatal(err)
				}
				if len(data) == 0 {
					t.Fatal("no body")
				}
				return
			}
			if !errors.Is(err, ErrTooSlow) || !errclass.IsRetryable(err) {
				t.Fatalf("error %v; want a temporary ErrTooSlow", err)
			}
			if !strings.Contains(err.Error(), "--low-speed-limit") {
				t.Errorf("error %q does not name the setting", err)
			}
			if got := len(trickle.requests()) - n0; got != 1 {
				t.Errorf("%d requests; a trickle is not resumed", got)
			}
		})
	}
}
