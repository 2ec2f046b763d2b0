package harness

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
	"golang.org/x/time/rate"
)

// chunk is the most a throttled write sends at once (and the bucket size).
const chunk = 32 << 10

// Wrap returns a bench.ServeOptions.Wrap hook that delays every response by
// latency and sends response bodies, all requests together, at most
// bytesPerSec bytes per second (a token bucket of 32 KiB). Zero values
// disable each; with both zero it returns nil.
func Wrap(bytesPerSec float64, latency time.Duration) func(http.Handler) http.Handler {
	if bytesPerSec <= 0 && latency <= 0 {
		return nil
	}
	var lim *rate.Limiter
	if bytesPerSec > 0 {
		lim = rate.NewLimiter(rate.Limit(bytesPerSec), chunk)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if latency > 0 {
				t := time.NewTimer(latency)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return
				}
			}
			if lim != nil {
				w = &throttled{ResponseWriter: w, r: r, lim: lim}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// ConnWrap returns a bench.ServeOptions.Wrap hook that sends every
// response body at most bytesPerSec bytes per second on its own (a token
// bucket of 32 KiB per request), as on a path where one connection is
// slower than the link. Zero or less returns nil.
func ConnWrap(bytesPerSec float64) func(http.Handler) http.Handler {
	if bytesPerSec <= 0 {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			lim := rate.NewLimiter(rate.Limit(bytesPerSec), chunk)
			next.ServeHTTP(&throttled{ResponseWriter: w, r: r, lim: lim}, r)
		})
	}
}

// throttled is a ResponseWriter whose body writes wait for the bucket.
type throttled struct {
	http.ResponseWriter
	r   *http.Request
	lim *rate.Limiter
}

// Write sends p in chunks, each when the bucket allows.
func (t *throttled) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), chunk)
		if err := t.lim.WaitN(t.r.Context(), k); err != nil {
			return n, err
		}
		m, err := t.ResponseWriter.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// Flush flushes the underlying writer when it can.
func (t *throttled) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (t *throttled) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// ParseRate parses a link rate such as "50MB/s", "1.5GB/s", "800KiB/s" or
// "1000000" (bytes per second; the "/s" is optional), as --bwlimit reads a
// bandwidth (fetch.ParseBandwidth): KB, MB and GB are powers of 1000, KiB,
// MiB and GiB of 1024. "" and "0" mean unlimited (0).
func ParseRate(s string) (float64, error) {
	v, err := fetch.ParseBandwidth(s)
	if err != nil {
		return 0, fmt.Errorf("harness: %w", err)
	}
	return v, nil
}
