package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"
)

// faultFiles writes a package, a document and a resource into a new
// directory and returns it with the package's bytes.
func faultFiles(t *testing.T) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	pkg := make([]byte, 100<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range pkg {
		pkg[i] = byte(rng.Uint32())
	}
	for name, data := range map[string][]byte{
		"pkg.zip": pkg,
		"doc.xml": []byte(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>`),
		"res.txt": bytes.Repeat([]byte("resource body\n"), 200),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, pkg
}

// serveFaults serves dir on loopback through an injector configured by f.
func serveFaults(t *testing.T, dir string, f Faults) (*Server, *FaultInjector) {
	t.Helper()
	inj, err := NewFaultInjector(f)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(t.Context(), dir, "127.0.0.1:0", ServeOptions{Wrap: inj.Wrap, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, inj
}

// faultClient is a plain client without connection reuse, so that a
// connection closed by a fault never spoils the next request.
func faultClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
}

// faultGet sends a GET with the headers given as "Name", "value" pairs and
// reads the whole body, returning what arrived and the read error.
func faultGet(t *testing.T, c *http.Client, url string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// TestFaultKinds checks each kind of fault on the wire, with a plain
// client: one row per kind.
func TestFaultKinds(t *testing.T) {
	t.Parallel()
	dir, pkg := faultFiles(t)
	pkgOnly := regexp.MustCompile(`^/pkg\.zip$`)
	tests := []struct {
		name  string
		f     Faults
		check func(t *testing.T, c *http.Client, url string)
	}{
		{"throttle, Retry-After seconds", Faults{Sequence: []FaultKind{FaultThrottle}, RetryAfter: 2 * time.Second, RetryAfterForm: RetryAfterSeconds},
			func(t *testing.T, c *http.Client, url string) {
				resp, _, _ := faultGet(t, c, url)
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
					t.Fatalf("got %d, Retry-After %q; want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
				}
				if resp, body, err := faultGet(t, c, url); resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(body, pkg) {
					t.Fatalf("second request: %d, %v", resp.StatusCode, err)
				}
			}},
		{"throttle, Retry-After date", Faults{Sequence: []FaultKind{FaultThrottle}, RetryAfter: time.Second, RetryAfterForm: RetryAfterDate},
			func(t *testing.T, c *http.Client, url string) {
				resp, _, _ := faultGet(t, c, url)
				at, err := http.ParseTime(resp.Header.Get("Retry-After"))
				if resp.StatusCode != http.StatusTooManyRequests || err != nil {
					t.Fatalf("got %d, Retry-After %q (%v); want 429 and an HTTP date", resp.StatusCode, resp.Header.Get("Retry-After"), err)
				}
				if d := time.Until(at); d < 0 || d > 2*time.Second {
					t.Fatalf("Retry-After %v from now, want within (0, 2s]", d)
				}
			}},
		{"storm", Faults{Sequence: []FaultKind{FaultStorm}, StormLength: 3, StormCodes: []int{http.StatusBadGateway}},
			func(t *testing.T, c *http.Client, url string) {
				// The storm hits whatever comes next, other paths too.
				for i, u := range []string{url, url, url[:len(url)-len("pkg.zip")] + "doc.xml", url} {
					resp, _, _ := faultGet(t, c, u)
					want := http.StatusBadGateway
					if i == 3 {
						want = http.StatusOK
					}
					if resp.StatusCode != want {
						t.Fatalf("request %d (%s): %d, want %d", i, u, resp.StatusCode, want)
					}
				}
			}},
		{"reset after N bytes", Faults{Sequence: []FaultKind{FaultReset}, ResetAfter: 1000},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url)
				if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(pkg)) {
					t.Fatalf("status %d, length %d", resp.StatusCode, resp.ContentLength)
				}
				if len(body) != 1000 || !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(body, pkg[:1000]) {
					t.Fatalf("read %d bytes, err %v; want 1000 good bytes, then an unexpected EOF", len(body), err)
				}
			}},
		{"reset after the header", Faults{Sequence: []FaultKind{FaultReset}, ResetAfter: -1},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url)
				if resp.StatusCode != http.StatusOK || len(body) != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("status %d, read %d bytes, err %v", resp.StatusCode, len(body), err)
				}
			}},
		{"drip-feed", Faults{Sequence: []FaultKind{FaultDrip}, DripChunk: 100, DripDelay: 5 * time.Millisecond, DripMax: 300 * time.Millisecond},
			func(t *testing.T, c *http.Client, url string) {
				start := time.Now()
				_, body, err := faultGet(t, c, url)
				took := time.Since(start)
				if err != nil || !bytes.Equal(body, pkg) {
					t.Fatalf("read %d bytes, err %v", len(body), err)
				}
				// 1,024 chunks at 5 ms would take 5 s: bounded by DripMax.
				if took < 250*time.Millisecond || took > 3*time.Second {
					t.Fatalf("took %v, want about 300 ms", took)
				}
			}},
		{"stall", Faults{Sequence: []FaultKind{FaultStall, FaultStall}, StallFor: 400 * time.Millisecond},
			func(t *testing.T, c *http.Client, url string) {
				start := time.Now()
				_, body, err := faultGet(t, c, url)
				if took := time.Since(start); err != nil || !bytes.Equal(body, pkg) || took < 400*time.Millisecond {
					t.Fatalf("read %d bytes in %v, err %v; want all after the 400 ms stall", len(body), took, err)
				}
				// A client with an idle timeout below the stall gives up.
				ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("a client giving up after 150 ms: err %v", err)
				}
			}},
		{"range ignored", Faults{Sequence: []FaultKind{FaultRangeIgnored}},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url, "Range", "bytes=10-")
				if resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(body, pkg) {
					t.Fatalf("status %d, %d bytes, err %v; want 200 and the whole body", resp.StatusCode, len(body), err)
				}
				if resp, _, _ := faultGet(t, c, url, "Range", "bytes=10-"); resp.StatusCode != http.StatusPartialContent {
					t.Fatalf("next Range request: %d, want 206", resp.StatusCode)
				}
			}},
		{"ETag changed", Faults{Sequence: []FaultKind{"", FaultETagChanged}},
			func(t *testing.T, c *http.Client, url string) {
				resp, _, _ := faultGet(t, c, url)
				old := resp.Header.Get("ETag")
				resp, body, err := faultGet(t, c, url, "Range", "bytes=10-", "If-Range", old)
				cur := resp.Header.Get("ETag")
				if resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(body, pkg) || cur == old || cur == "" {
					t.Fatalf("resume: status %d, ETag %s (was %s), err %v; want 200, the whole body, a new ETag", resp.StatusCode, cur, old, err)
				}
				if resp, body, _ := faultGet(t, c, url, "Range", "bytes=10-", "If-Range", cur); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, pkg[10:]) {
					t.Fatalf("resume with the new ETag: %d", resp.StatusCode)
				}
				if resp, _, _ := faultGet(t, c, url, "Range", "bytes=10-", "If-Range", old); resp.StatusCode != http.StatusOK {
					t.Fatalf("resume with the old ETag: %d, want 200", resp.StatusCode)
				}
				if resp, _, _ := faultGet(t, c, url, "If-None-Match", cur); resp.StatusCode != http.StatusNotModified {
					t.Fatalf("If-None-Match with the new ETag: %d, want 304", resp.StatusCode)
				}
			}},
		{"Content-Length short", Faults{Sequence: []FaultKind{FaultLengthShort}, LengthDelta: 100},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url)
				if resp.ContentLength != int64(len(pkg)-100) || err != nil || !bytes.Equal(body, pkg[:len(pkg)-100]) {
					t.Fatalf("Content-Length %d, %d bytes, err %v; want a complete response of %d bytes", resp.ContentLength, len(body), err, len(pkg)-100)
				}
			}},
		{"Content-Length long", Faults{Sequence: []FaultKind{FaultLengthLong}, LengthDelta: 100},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url)
				if resp.ContentLength != int64(len(pkg)+100) || !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(body, pkg) {
					t.Fatalf("Content-Length %d, %d bytes, err %v; want the body, then an unexpected EOF", resp.ContentLength, len(body), err)
				}
			}},
		{"Content-Length missing", Faults{Sequence: []FaultKind{FaultLengthMissing}},
			func(t *testing.T, c *http.Client, url string) {
				resp, body, err := faultGet(t, c, url)
				if resp.ContentLength != -1 || !slices.Contains(resp.TransferEncoding, "chunked") || err != nil || !bytes.Equal(body, pkg) {
					t.Fatalf("Content-Length %d, transfer encoding %v, err %v", resp.ContentLength, resp.TransferEncoding, err)
				}
			}},
		{"flipped byte", Faults{Sequence: []FaultKind{FaultFlip}},
			func(t *testing.T, c *http.Client, url string) {
				_, body, err := faultGet(t, c, url)
				if err != nil || len(body) != len(pkg) {
					t.Fatalf("%d bytes, err %v", len(body), err)
				}
				diff := 0
				for i := range body {
					if body[i] != pkg[i] {
						diff++
					}
				}
				if diff != 1 {
					t.Fatalf("%d bytes differ, want 1", diff)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, inj := serveFaults(t, dir, tc.f)
			tc.check(t, faultClient(), srv.URL+"pkg.zip")
			st := inj.Stats()
			kind := tc.f.Sequence[len(tc.f.Sequence)-1]
			if st.ByKind[kind] == 0 {
				t.Errorf("stats %v: no %s counted", st, kind)
			}
		})
	}
	// ResumeRate applies to requests with a Range header only.
	t.Run("resume rate", func(t *testing.T) {
		t.Parallel()
		srv, inj := serveFaults(t, dir, Faults{ResumeRate: 1, Kinds: []FaultKind{FaultRangeIgnored, FaultReset}, Weights: map[FaultKind]float64{FaultReset: 0}})
		c := faultClient()
		if resp, body, err := faultGet(t, c, srv.URL+"pkg.zip"); resp.StatusCode != http.StatusOK || err != nil || !bytes.Equal(body, pkg) {
			t.Fatalf("plain request: %d, %v", resp.StatusCode, err)
		}
		if resp, _, _ := faultGet(t, c, srv.URL+"pkg.zip", "Range", "bytes=1-"); resp.StatusCode != http.StatusOK {
			t.Fatalf("Range request: %d, want 200", resp.StatusCode)
		}
		if st := inj.Stats(); st.Faulted != 1 || st.ByKind[FaultRangeIgnored] != 1 {
			t.Fatalf("stats %v", st)
		}
	})
	// Only the targeted path is touched.
	t.Run("path filter", func(t *testing.T) {
		t.Parallel()
		srv, inj := serveFaults(t, dir, Faults{Rate: 1, Kinds: []FaultKind{FaultThrottle}, Path: pkgOnly})
		c := faultClient()
		if resp, _, _ := faultGet(t, c, srv.URL+"doc.xml"); resp.StatusCode != http.StatusOK {
			t.Fatalf("doc.xml: %d", resp.StatusCode)
		}
		if resp, _, _ := faultGet(t, c, srv.URL+"pkg.zip"); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("pkg.zip: %d", resp.StatusCode)
		}
		if st := inj.Stats(); st.Requests != 1 || st.ByKind[FaultThrottle] != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// TestFaultScope: HEAD requests, administrative paths, other targets,
// exhausted per-path budgets and a disabled injector are left alone.
func TestFaultScope(t *testing.T) {
	t.Parallel()
	dir, _ := faultFiles(t)
	srv, inj := serveFaults(t, dir, Faults{Rate: 1, Kinds: []FaultKind{FaultThrottle}, Targets: TargetPackages | TargetResources, MaxPerPath: 2})
	c := faultClient()
	status := func(method, p string) int {
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+p[1:], nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodHead, "/pkg.zip", http.StatusOK},
		{http.MethodGet, "/_admin/stats", http.StatusNotFound},
		{http.MethodGet, "/doc.xml", http.StatusOK}, // documents not targeted
		{http.MethodGet, "/res.txt", http.StatusTooManyRequests},
		{http.MethodGet, "/pkg.zip", http.StatusTooManyRequests},
		{http.MethodGet, "/pkg.zip", http.StatusTooManyRequests},
		{http.MethodGet, "/pkg.zip", http.StatusOK}, // MaxPerPath reached
	} {
		if got := status(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
	inj.SetEnabled(false)
	if got := status(http.MethodGet, "/res.txt"); got != http.StatusOK {
		t.Errorf("disabled: %d", got)
	}
	if st := inj.Stats(); st.Faulted != 3 || st.Requests != 4 {
		t.Errorf("stats %+v, want 3 faults in 4 requests", st)
	}
}

// faultScript is the request sequence of the determinism test: per path, a
// few plain requests and a few resumes.
var faultScript = []string{"/pkg.zip", "/doc.xml", "/res.txt"}

// runScript sends, for each path, 12 requests (every third with a Range),
// the paths in parallel when concurrent, and returns the trace of
// decisions by path and what the client saw.
func runScript(t *testing.T, dir string, f Faults, concurrent bool) (map[string][]string, FaultStats) {
	t.Helper()
	srv, inj := serveFaults(t, dir, f)
	var mu sync.Mutex
	seen := map[string][]string{}    // what the client saw, under mu
	decided := map[string][]string{} // the injector's decisions, under inj.mu
	inj.mu.Lock()
	inj.trace = func(p string, n int, k FaultKind) {
		decided[p] = append(decided[p], fmt.Sprintf("%d:%s", n, k))
	}
	inj.mu.Unlock()
	c := faultClient()
	var wg sync.WaitGroup
	for _, p := range faultScript {
		one := func() {
			for i := range 12 {
				var hdr []string
				if i%3 == 2 {
					hdr = []string{"Range", "bytes=5-"}
				}
				resp, body, err := faultGet(t, c, srv.URL+p[1:], hdr...)
				mu.Lock()
				seen[p] = append(seen[p], fmt.Sprintf("%d %d %d %v", i, resp.StatusCode, len(body), err != nil))
				mu.Unlock()
			}
		}
		if concurrent {
			wg.Go(one)
		} else {
			one()
		}
	}
	wg.Wait()
	st := inj.Stats()
	inj.mu.Lock()
	defer inj.mu.Unlock()
	for p, d := range decided {
		seen[p] = append(seen[p], d...)
	}
	return seen, st
}

// TestFaultDeterminism: the same seed gives the same faults, request by
// request, whether the paths are requested one after the other or in
// parallel; another seed gives others.
func TestFaultDeterminism(t *testing.T) {
	t.Parallel()
	dir, _ := faultFiles(t)
	// Storms hit whatever request comes next, so they depend on the
	// interleaving: they are left out of the parallel runs.
	kinds := slices.DeleteFunc(FaultKinds(), func(k FaultKind) bool { return k == FaultStorm })
	f := Faults{Seed: 42, Rate: 0.6, Kinds: kinds, StallFor: 20 * time.Millisecond, DripMax: 20 * time.Millisecond, DripDelay: time.Millisecond}
	a, sa := runScript(t, dir, f, false)
	b, sb := runScript(t, dir, f, true)
	if fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(sa) != fmt.Sprint(sb) {
		t.Fatalf("same seed, different faults:\n%v\n%v\n%v\n%v", a, b, sa, sb)
	}
	if sa.Faulted < 5 || len(sa.ByKind) < 4 {
		t.Fatalf("too few faults to tell: %v", sa)
	}
	f.Seed = 43
	if c, _ := runScript(t, dir, f, true); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds 42 and 43 gave the same faults:\n%v", a)
	}
	// With storms, sequential runs are reproducible too.
	f.Kinds, f.Seed = nil, 7
	a, sa = runScript(t, dir, f, false)
	b, sb = runScript(t, dir, f, false)
	if fmt.Sprint(a) != fmt.Sprint(b) || fmt.Sprint(sa) != fmt.Sprint(sb) {
		t.Fatalf("same seed with storms, different faults:\n%v\n%v", a, b)
	}
	t.Logf("seed 7: %v", sa)
}

func TestParseFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"", len(FaultKinds()), true},
		{"all", len(FaultKinds()), true},
		{"transient", len(TransientFaultKinds()), true},
		{"reset, stall,reset", 2, true},
		{"transient,flip", len(TransientFaultKinds()) + 1, true},
		{"reset,bogus", 0, false},
	} {
		ks, err := ParseFaultKinds(tc.in)
		if (err == nil) != tc.ok || len(ks) != tc.want {
			t.Errorf("ParseFaultKinds(%q) = %v, %v", tc.in, ks, err)
		}
	}
	for _, tc := range []struct {
		in   string
		want FaultTargets
		ok   bool
	}{
		{"", TargetAll, true},
		{"packages", TargetPackages, true},
		{"documents, resources", TargetDocuments | TargetResources, true},
		{"files", 0, false},
	} {
		got, err := ParseFaultTargets(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseFaultTargets(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, f := range []Faults{{Rate: 2}, {Kinds: []FaultKind{"x"}}, {StormCodes: []int{404}}, {RetryAfterForm: "weeks"}, {DripChunk: -1}, {MaxPerPath: -1}, {ResumeRate: -0.5}} {
		if _, err := NewFaultInjector(f); err == nil {
			t.Errorf("NewFaultInjector(%+v) accepted", f)
		}
	}
	if s := (FaultStats{Requests: 9, Faulted: 4, Storms: 1, ByKind: map[FaultKind]int64{FaultStorm: 3, FaultReset: 1}}).String(); s != "4 faults in 9 requests: storm 3 (1 storms), reset 1" {
		t.Errorf("String() = %q", s)
	}
}
