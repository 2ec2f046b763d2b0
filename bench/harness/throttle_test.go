package harness

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestConnWrap(t *testing.T) {
	if ConnWrap(0) != nil {
		t.Fatal("ConnWrap(0) is not nil")
	}
	const size = 300 << 10
	const rateBps = 1e6
	body := bytes.Repeat([]byte{'x'}, size)
	srv := httptest.NewServer(ConnWrap(rateBps)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	})))
	defer srv.Close()
	// The bucket of each request starts full (32 KiB); the rest waits.
	least := time.Duration(float64(size-chunk) / rateBps * 0.9 * float64(time.Second))
	for _, conns := range []int{1, 3} {
		start := time.Now()
		var wg sync.WaitGroup
		took := make([]time.Duration, conns)
		errs := make([]error, conns)
		for i := range conns {
			wg.Go(func() {
				resp, err := http.Get(srv.URL)
				if err != nil {
					errs[i] = err
					return
				}
				defer resp.Body.Close()
				if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != size {
					errs[i] = fmt.Errorf("read %d bytes: %v", n, err)
				}
				took[i] = time.Since(start)
			})
		}
		wg.Wait()
		wall := time.Since(start)
		for i := range conns {
			if errs[i] != nil {
				t.Fatalf("%d connections: %v", conns, errs[i])
			}
			if took[i] < least {
				t.Errorf("%d connections: one took %v, want at least %v", conns, took[i], least)
			}
		}
		// Each connection has a rate of its own: together they take about
		// as long as one, not conns times as long.
		if wall > 2*least {
			t.Errorf("%d connections took %v, want under %v", conns, wall, 2*least)
		}
	}
}
