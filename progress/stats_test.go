package progress

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

func TestStatsString(t *testing.T) {
	tests := []struct {
		name string
		s    stats
		want string
	}{
		{"known total", stats{done: 3481, total: 20000, exact: true, eta: 28 * time.Second, received: 651 * mib, verified: 210*mib + 300*kib, written: 3481, packagesDone: 1, packages: 4},
			"resources 3481 of 20000, 17%, ETA 28s; written 3481, unchanged 0, failed 0; received 651.0 MiB, verified 210.3 MiB; packages 1/4"},
		{"estimated total", stats{done: 120, total: 1000, eta: -1, written: 117, failed: 3, received: 5 * mib, packages: 2},
			"resources 120 of ~1000, 12%; written 117, unchanged 0, failed 3; received 5.00 MiB, verified 0 B; packages 0/2"},
		{"nothing yet", stats{eta: -1}, "resources 0; written 0, unchanged 0, failed 0; received 0 B, verified 0 B"},
		{"done", stats{done: 5, total: 5, exact: true, eta: 0, written: 3, unchanged: 1, deleted: 1},
			"resources 5 of 5, 100%, ETA 0s; written 3, unchanged 1, failed 0, deleted 1; received 0 B, verified 0 B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestReadStats: the work is the resources finished of the run's total —
// exact once every package and list is read; before, scaled from those
// planned by the share of the declared package bytes received; the bytes
// are those received and those verified.
func TestReadStats(t *testing.T) {
	var c pipeline.Counts
	c.PackagesTotal.Store(3)
	c.PackagesDone.Store(1)
	c.PackagesFailed.Store(1)
	c.PackageBytesTotal.Store(3000)
	c.PackageBytesDone.Store(1500)
	c.BytesDownloaded.Store(1000)
	c.BytesWritten.Store(99)
	c.Planned.Store(40)
	c.Written.Store(4)
	c.Unchanged.Store(5)
	c.Failed.Store(6)
	c.Deleted.Store(7)
	want := stats{done: 22, total: 80, received: 1000, verified: 99, written: 4, unchanged: 5, failed: 6, deleted: 7, packagesDone: 2, packages: 3, eta: 29 * time.Second}
	if got := readStats(&c, 2); got != want {
		t.Errorf("readStats = %+v, want %+v", got, want)
	}
	c.PackagesUnsized.Store(1) // one package's length is not declared
	if got := readStats(&c, 2); got.total != 40 || got.exact {
		t.Errorf("with an unsized package, total = %d (exact %v), want those planned, 40", got.total, got.exact)
	}
	c.PlanRead.Store(true)
	if got := readStats(&c, 0); got.total != 40 || !got.exact || got.eta >= 0 {
		t.Errorf("every package read: total %d (exact %v), eta %v; want 40, exact, unknown", got.total, got.exact, got.eta)
	}
	var lists pipeline.Counts // a run reading lists: no packages
	lists.BytesDownloaded.Store(42)
	lists.Planned.Store(3)
	lists.Written.Store(1)
	if got := readStats(&lists, 0); got.received != 42 || got.total != 3 || got.done != 1 {
		t.Errorf("without packages: %+v; want received 42, 1 of 3", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {10 * kib, "10.0 KiB"},
		{412*mib + 300*kib, "412.3 MiB"}, {gib + 20*mib, "1.02 GiB"}, {5 << 40, "5.00 TiB"}, {1 << 62, "4.00 EiB"},
	} {
		if got := formatBytes(tt.n); got != tt.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFormatETA(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-5, "0s"}, {time.Second, "1s"}, {1500 * time.Millisecond, "2s"},
		{185 * time.Second, "3m05s"}, {7380 * time.Second, "2h03m"}, {101 * 24 * time.Hour, "-"},
	} {
		if got := formatETA(tt.d); got != tt.want {
			t.Errorf("formatETA(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestRateMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		at   float64
		n    int64
		want float64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"one sample", []step{{0, 100, 0}}},
		{"steady", []step{{0, 0, 0}, {1, 100, 100}, {2, 200, 100}}},
		{"the window forgets the past", []step{{0, 0, 0}, {1, 1000, 1000}, {2, 1000, 500}, {3, 1000, 0}, {4, 1000, 0}, {5, 1100, 50}}},
		{"sparse samples span the window", []step{{0, 0, 0}, {10, 500, 50}, {20, 1500, 100}}},
		{"a count that goes back starts again", []step{{0, 0, 0}, {1, 500, 500}, {2, 100, 0}, {3, 300, 200}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := rateMeter{window: 2 * time.Second}
			for _, s := range tt.steps {
				if got := m.add(at(s.at), s.n); got != s.want {
					t.Errorf("at %vs with %d: rate %v, want %v", s.at, s.n, got, s.want)
				}
			}
		})
	}
}

func TestRetryLine(t *testing.T) {
	const u = "http://127.0.0.1:9/some/long/path/to/capabilitylist.xml"
	r := fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: 1234 * time.Millisecond,
		Err: errors.New("GET " + u + ": dial tcp 127.0.0.1:9: connect: connection refused")}
	tests := []struct {
		name   string
		r      fetch.Retry
		others int
		width  int
		want   string
	}{
		{"whole", r, 0, 0, "retrying " + u + ": dial tcp 127.0.0.1:9: connect: connection refused (attempt 2 of 6, next in 1.2s)"},
		{"others", r, 2, 0, "retrying " + u + ": dial tcp 127.0.0.1:9: connect: connection refused (attempt 2 of 6, next in 1.2s); 2 more retrying"},
		{"narrow: the URL's path gives way", r, 0, 120, "retrying http://127.0.0.1:9/…list.xml: dial tcp 127.0.0.1:9: connect: connection refused (attempt 2 of 6, next in 1.2s)"},
		{"short wait", fetch.Retry{URL: "http://x/", Attempt: 3, Attempts: 4, Wait: 577 * time.Millisecond, Err: errors.New("GET http://x/: HTTP 503 Service Unavailable")}, 0, 0,
			"retrying http://x/: HTTP 503 Service Unavailable (attempt 3 of 4, next in 600ms)"},
		{"long wait", fetch.Retry{URL: "http://x/", Attempt: 2, Attempts: 2, Wait: 90*time.Second + 400*time.Millisecond, Err: errors.New("GET http://x/: HTTP 429 Too Many Requests")}, 0, 0,
			"retrying http://x/: HTTP 429 Too Many Requests (attempt 2 of 2, next in 1m30s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryLine(tt.r, tt.others, tt.width)
			if got != tt.want {
				t.Errorf("retryLine =\n%q\nwant\n%q", got, tt.want)
			}
			if tt.width > 0 && len([]rune(got)) >= tt.width {
				t.Errorf("%d runes, not narrower than %d", len([]rune(got)), tt.width)
			}
			if strings.Count(got, "127.0.0.1:9/") > 1 || strings.Count(got, "http://x/") > 1 {
				t.Errorf("the line names the URL more than once: %q", got)
			}
		})
	}
}

func TestRetryBoard(t *testing.T) {
	b := newRetryBoard()
	t0 := time.Unix(1000, 0)
	if l := b.line(t0, 0); l != "" {
		t.Fatalf("empty board: %q", l)
	}
	fail := func(u string, wait time.Duration) fetch.Retry {
		return fetch.Retry{URL: u, Attempt: 2, Attempts: 6, Wait: wait, Err: errors.New("GET " + u + ": EOF")}
	}
	b.note(fail("http://a/", time.Second), t0)
	select {
	case <-b.changed:
	default:
		t.Error("noting a retry did not signal the display")
	}
	b.note(fail("http://b/", time.Second), t0.Add(time.Second))
	if l := b.line(t0.Add(time.Second), 0); !strings.HasPrefix(l, "retrying http://b/: EOF") || !strings.HasSuffix(l, "; 1 more retrying") {
		t.Errorf("two pending: %q", l)
	}
	// a's attempt was due at t0+1s; it stays retryGrace longer.
	if l := b.line(t0.Add(time.Second+retryGrace+time.Millisecond), 0); !strings.HasPrefix(l, "retrying http://b/") || strings.Contains(l, "more") {
		t.Errorf("a expired: %q", l)
	}
	if l := b.line(t0.Add(2*time.Second+retryGrace+time.Millisecond), 0); l != "" {
		t.Errorf("both expired: %q", l)
	}
}

func TestFit(t *testing.T) {
	for _, tt := range []struct {
		s     string
		width int
		want  string
	}{
		{"abcdef", 0, "abcdef"}, {"abcdef", 7, "abcdef"}, {"abcdef", 6, "abcd…"}, {"abcdef", 1, ""}, {"ééééé", 4, "éé…"},
	} {
		if got := fit(tt.s, tt.width); got != tt.want {
			t.Errorf("fit(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
}

func TestShortenURL(t *testing.T) {
	for _, tt := range []struct {
		u    string
		n    int
		want string
	}{
		{"http://h/abc", 20, "http://h/abc"},
		{"http://127.0.0.1:9/a/b/capabilitylist.xml", 38, "http://127.0.0.1:9/…capabilitylist.xml"},
		{"http://a-very-long-host-name.example.org/x/y/z.xml", 30, "http://a-very-…e.org/x/y/z.xml"},
		{"no-scheme-at-all-here", 10, "no-s…-here"},
	} {
		got := shortenURL(tt.u, tt.n)
		if got != tt.want || len([]rune(got)) > tt.n {
			t.Errorf("shortenURL(%q, %d) = %q, want %q", tt.u, tt.n, got, tt.want)
		}
	}
}
