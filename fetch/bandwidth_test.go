package fetch

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBandwidth: with a bandwidth limit, reading bodies waits as long as
// the limit says (1 MiB at 512 KiB/s: the bytes past the first burst take
// about 1.75 s), and the waits are counted; without one, nothing waits.
func TestBandwidth(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	t.Cleanup(srv.Close)
	for _, limit := range []float64{0, 512 << 10} {
		o := testOptions()
		o.Bandwidth = limit
		c, sl := newTestClient(t, o)
		_, got, err := readAll(t.Context(), c, srv.URL)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("limit %v: %d bytes, %v", limit, len(got), err)
		}
		var waited time.Duration
		for _, d := range sl.get() {
			waited += d
		}
		burst := max(int(limit/4), bandwidthBurst)
		want := time.Duration(float64(len(body)-burst) / limit * float64(time.Second))
		switch {
		case limit == 0 && (waited != 0 || c.Stats().Throttled != 0):
			t.Errorf("no limit, yet waited %v", waited)
		case limit > 0 && (c.Stats().Throttled == 0 || waited < want*9/10):
			t.Errorf("limit %v B/s: waited %v (%d times), want about %v", limit, waited, c.Stats().Throttled, want)
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 0, true}, {"0", 0, true}, {"10M", 10 << 20, true}, {"500k", 500 << 10, true}, {"2.5MB/s", 2.5e6, true},
		{"1GiB/s", 1 << 30, true}, {"800", 800, true}, {"-1M", 0, false}, {"fast", 0, false}, {"10 MB", 10e6, true},
	} {
		got, err := ParseBandwidth(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
