package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// httpFaultSource generates the small source of the HTTP fault tests (60
// resources in 3 packages) and returns its options and truth.
func httpFaultSource(t *testing.T) (bench.GenOptions, map[string][]byte) {
	t.Helper()
	gen := bench.GenOptions{Dir: t.TempDir(), Resources: 60, Packages: 3, Seed: 17, MeanSize: 2 << 10}
	if _, err := bench.Generate(t.Context(), gen); err != nil {
		t.Fatal(err)
	}
	return gen, truthAfter(t, gen, 0)
}

// httpFaultPackageURIs lists the resources of a generated package, from
// its manifest copy.
func httpFaultPackageURIs(t *testing.T, dir, name string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "packages", name+".manifest.xml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := manifest.NewReader(f, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[e.Loc] = true
	}
}

// TestHTTPFaults runs a baseline against a source with one HTTP item of
// the hostile-input checklist injected (bench.FaultInjector), one row per
// item. Transient faults are survived: status ok, every resource delivered
// intact, and the retries, resumes or restarts that survived them show in
// the report. Permanent ones fail the one package they hit, with an error
// naming what is wrong; everything else is delivered. In every case
// nothing is written outside the sink, and the sink holds nothing that
// differs from the source.
func TestHTTPFaults(t *testing.T) {
	t.Parallel()
	gen, truth := httpFaultSource(t)
	const victim = "part-00002"
	victimURIs := httpFaultPackageURIs(t, gen.Dir, victim)
	if len(victimURIs) == 0 || len(victimURIs) == len(truth) {
		t.Fatalf("package %s holds %d of %d resources", victim, len(victimURIs), len(truth))
	}
	onlyVictim := regexp.MustCompile(`/` + victim + `\.zip$`)
	seq := func(k ...bench.FaultKind) []bench.FaultKind { return k }
	tests := []struct {
		name   string
		faults bench.Faults
		// client changes the fetch options of the harness (retries 2,
		// backoff 1–10 ms, stall timeout 5 s).
		client func(o *fetch.Options)
		// permanent, when set, is what the victim package's failure must
		// say; the run is then partial.
		permanent string
		// streamedKept: entries of the victim that arrived before the
		// fault, each verified against its own manifest entry, may stay
		// delivered (and, delivered, must be the source's bytes).
		streamedKept bool
		// survived checks the report's fetch counters of a survived run.
		survived func(rep *runreport.Report) bool
		minTook  time.Duration
		maxTook  time.Duration
	}{
		{name: "429 with Retry-After in seconds",
			faults:   bench.Faults{Sequence: seq(bench.FaultThrottle), Targets: bench.TargetPackages, RetryAfter: time.Second, RetryAfterForm: bench.RetryAfterSeconds},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Retries >= 3 },
			minTook:  time.Second},
		{name: "429 with Retry-After as an HTTP date",
			faults:   bench.Faults{Sequence: seq(bench.FaultThrottle), Targets: bench.TargetPackages, RetryAfter: time.Second, RetryAfterForm: bench.RetryAfterDate},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Retries >= 3 },
			minTook:  900 * time.Millisecond},
		{name: "503 with Retry-After as an HTTP date",
			faults: bench.Faults{Sequence: seq(bench.FaultStorm), Targets: bench.TargetPackages, StormLength: 1, StormCodes: []int{503},
				RetryAfter: time.Second, RetryAfterForm: bench.RetryAfterDate},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Retries >= 3 },
			minTook:  900 * time.Millisecond},
		{name: "5xx storm",
			faults:   bench.Faults{Sequence: seq(bench.FaultStorm), StormLength: 4, RetryAfter: -1},
			client:   func(o *fetch.Options) { o.Retries = 5 },
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Retries >= 4 }},
		{name: "reset mid-body",
			faults:   bench.Faults{Sequence: seq(bench.FaultReset), ResetAfter: 1000},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Resumes >= 3 }},
		{name: "drip-feed",
			faults:   bench.Faults{Sequence: seq(bench.FaultDrip), DripChunk: 256, DripDelay: 2 * time.Millisecond, DripMax: 300 * time.Millisecond},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Retries == 0 },
			minTook:  300 * time.Millisecond},
		{name: "stall mid-body",
			faults:   bench.Faults{Sequence: seq(bench.FaultStall), Targets: bench.TargetPackages, StallFor: 20 * time.Second},
			client:   func(o *fetch.Options) { o.StallTimeout = 300 * time.Millisecond },
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Resumes >= 1 },
			maxTook:  10 * time.Second},
		{name: "Range ignored on resume",
			faults:   bench.Faults{Sequence: seq(bench.FaultReset, bench.FaultRangeIgnored), Targets: bench.TargetPackages, ResetAfter: 1000},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Restarts >= 3 }},
		{name: "ETag changed on resume",
			faults:   bench.Faults{Sequence: seq(bench.FaultReset, bench.FaultETagChanged), Targets: bench.TargetPackages, ResetAfter: 1000},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Restarts >= 3 }},
		{name: "Content-Length missing",
			faults:   bench.Faults{Sequence: seq(bench.FaultLengthMissing)},
			survived: func(rep *runreport.Report) bool { return true }},
		// A length or md5 that disagrees with the Resource Dump once (bytes
		// damaged in transit) is survived: the package is downloaded again.
		{name: "flipped byte once",
			faults:   bench.Faults{Sequence: seq(bench.FaultFlip), Path: onlyVictim},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Restarts >= 1 }},
		{name: "Content-Length short once",
			faults:   bench.Faults{Sequence: seq(bench.FaultLengthShort), Path: onlyVictim},
			survived: func(rep *runreport.Report) bool { return rep.Fetch.Restarts >= 1 }},
		// A second mismatch is the package's own: a permanent failure of
		// that package, so the injector hits every request of the victim:
		// "a length that never matches".
		{name: "Content-Length short",
			faults:    bench.Faults{Rate: 1, Kinds: seq(bench.FaultLengthShort), Path: onlyVictim},
			permanent: "Content-Length"},
		{name: "Content-Length long",
			faults:    bench.Faults{Rate: 1, Kinds: seq(bench.FaultLengthLong), Path: onlyVictim},
			permanent: "Content-Length"},
		// The package is checked against the strongest hash its dump
		// gives (packageExpect).
		{name: "flipped byte in a package",
			faults:    bench.Faults{Rate: 1, Kinds: seq(bench.FaultFlip), Path: onlyVictim},
			permanent: "sha-256", streamedKept: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			tc.faults.Seed = 1
			inj, err := bench.NewFaultInjector(tc.faults)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := bench.Serve(ctx, gen.Dir, "127.0.0.1:0", bench.ServeOptions{Wrap: inj.Wrap, CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			h := newHarness(t)
			spool := t.TempDir()
			start := time.Now()
			rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
				fo := fetch.Options{Retries: 2, BackoffInitial: time.Millisecond, BackoffMax: 10 * time.Millisecond, StallTimeout: 5 * time.Second}
				if tc.client != nil {
					tc.client(&fo)
				}
				o.Client = fetch.New(fo)
				o.SpoolDir = spool
			})
			took := time.Since(start)
			st := inj.Stats()
			t.Logf("%v; %s; fetch %+v; faults: %v", took.Round(time.Millisecond), strings.TrimSpace(rep.Summary()), rep.Fetch, st)
			if st.Faulted == 0 {
				t.Fatalf("no fault injected")
			}
			got := h.held(ctx)
			// Nothing unverified in the sink: every body held is the
			// source's.
			for uri, b := range got {
				if want, ok := truth[uri]; !ok || !bytes.Equal(b, want) {
					t.Errorf("the sink holds %s, which differs from the source", uri)
				}
			}
			if tc.permanent == "" {
				if rep.Status != runreport.StatusOK || len(got) != len(truth) {
					t.Fatalf("status %s, %d of %d resources held; failures %+v", rep.Status, len(got), len(truth), rep.Failures)
				}
				if !tc.survived(rep) {
					t.Errorf("the report's fetch counters %+v do not show how the fault was survived", rep.Fetch)
				}
			} else {
				if rep.Status != runreport.StatusPartial || rep.Packages.Failed != 1 {
					t.Fatalf("status %s, %d packages failed; want partial, 1", rep.Status, rep.Packages.Failed)
				}
				if len(rep.Failures) != 1 {
					t.Fatalf("failures %+v, want one, of the package", rep.Failures)
				}
				f := rep.Failures[0]
				if !strings.HasSuffix(f.URI, victim+".zip") || !f.Permanent || !strings.Contains(f.Error, tc.permanent) {
					t.Errorf("failure %+v: want a permanent failure of %s mentioning %q", f, victim, tc.permanent)
				}
				for uri := range truth {
					if _, held := got[uri]; held == victimURIs[uri] && !(held && tc.streamedKept) {
						t.Errorf("%s (in the failed package: %v) held: %v", uri, victimURIs[uri], held)
					}
				}
			}
			if tc.minTook > 0 && took < tc.minTook {
				t.Errorf("took %v, want at least %v (Retry-After honoured)", took, tc.minTook)
			}
			if tc.maxTook > 0 && took > tc.maxTook {
				t.Errorf("took %v, want at most %v", took, tc.maxTook)
			}
			// Nothing outside the sink: the harness dir holds only the
			// mirror and the state, the spool directory nothing.
			entries, _ := os.ReadDir(h.dir)
			for _, e := range entries {
				if e.Name() != "mirror" && !strings.HasPrefix(e.Name(), "state.db") {
					t.Errorf("unexpected %s next to the sink", e.Name())
				}
			}
			if left, _ := os.ReadDir(spool); len(left) > 0 {
				t.Errorf("%d files left in the spool directory", len(left))
			}
		})
	}
}

// TestHTTPFaultDocumentChanged: a document whose ETag changes while a
// resume of it is under way (reset, then a new ETag) is downloaded again
// from the start before any of its entries is acted on: the run ends ok
// with everything delivered.
func TestHTTPFaultDocumentChanged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gen, truth := httpFaultSource(t)
	inj, err := bench.NewFaultInjector(bench.Faults{Sequence: []bench.FaultKind{bench.FaultReset, bench.FaultETagChanged},
		Path: regexp.MustCompile(`^/resourcedump\.xml$`), ResetAfter: 100})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(ctx, gen.Dir, "127.0.0.1:0", bench.ServeOptions{Wrap: inj.Wrap, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, nil)
	if st := inj.Stats(); st.ByKind[bench.FaultETagChanged] != 1 {
		t.Fatalf("faults %v", st)
	}
	if got := h.held(ctx); rep.Status != runreport.StatusOK || len(got) != len(truth) || rep.Fetch.Restarts < 1 {
		t.Fatalf("%s (restarts %d)", rep.Summary(), rep.Fetch.Restarts)
	}
}

// TestHTTPFaultEndlessDocument: a source that answers for its Resource Dump
// with an endless, well-formed-looking body (chunked, no Content-Length) is
// cut off at Options.MaxDocumentSize: the run fails at once with an error
// naming the document and the cap, and leaves nothing in the spool
// directory or the sink.
func TestHTTPFaultEndlessDocument(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gen, _ := httpFaultSource(t)
	var sent atomic.Int64
	endless := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/resourcedump.xml" {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
				`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">`+"\n")
			pad := []byte(strings.Repeat("<!-- more to come -->\n", 1000))
			for r.Context().Err() == nil {
				n, err := w.Write(pad)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
	}
	const limit = 1 << 20
	h, spool, rep, err := baselineBehind(ctx, t, gen, endless, func(o *pipeline.Options) { o.MaxDocumentSize = limit })
	msg := ""
	switch {
	case err != nil:
		msg = err.Error()
	case rep.Status == runreport.StatusOK:
		t.Fatalf("status ok from an endless Resource Dump: %s", rep.Summary())
	case rep.Error != "":
		msg = rep.Error
	case len(rep.Failures) > 0:
		msg = rep.Failures[0].Error
	}
	t.Logf("err %v; %s; server sent %d bytes", err, strings.TrimSpace(rep.Summary()), sent.Load())
	if !errors.Is(err, fetch.ErrTooLarge) && !strings.Contains(msg, fetch.ErrTooLarge.Error()) ||
		!strings.Contains(msg, "resourcedump.xml") || !strings.Contains(msg, strconv.Itoa(limit)) {
		t.Errorf("the run's error %q does not name the document, its cap of %d bytes and %q", msg, limit, fetch.ErrTooLarge)
	}
	// The server may have written a little ahead into socket buffers, but
	// not far past the cap.
	if n := sent.Load(); n > 16*limit {
		t.Errorf("the server sent %d bytes before the download stopped (cap %d)", n, limit)
	}
	if left, _ := os.ReadDir(spool); len(left) > 0 {
		t.Errorf("%d files left in the spool directory", len(left))
	}
	if got := h.held(ctx); len(got) > 0 {
		t.Errorf("the sink holds %d resources from a source whose dump was unreadable", len(got))
	}
}

// TestHTTPFaultEndlessPackage: a package whose dump gives no length, which
// its server sends without end (its bytes, then zeros, chunked), is cut off
// at Options.MaxPackageSize: the package fails permanently, naming the cap
// and fetch.ErrTooLarge, the other packages are delivered, and nothing is
// left in the spool directory.
func TestHTTPFaultEndlessPackage(t *testing.T) {
	t.Parallel()
	// A bound, not a timing: without the cap the download never ends.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	gen, truth := httpFaultSource(t)
	lengths := regexp.MustCompile(` length="[0-9]+"`)
	var sent atomic.Int64
	endless := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/resourcedump.xml":
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r)
				w.Header().Set("Content-Type", "application/xml")
				w.Write(lengths.ReplaceAll(rec.Body.Bytes(), nil))
			case strings.HasSuffix(r.URL.Path, "part-00001.zip"):
				body, err := os.ReadFile(filepath.Join(gen.Dir, "packages", "part-00001.zip"))
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/zip")
				pad := make([]byte, 32<<10)
				for b := body; r.Context().Err() == nil; b = pad {
					n, err := w.Write(b)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
	const limit = 1 << 20
	h, spool, rep, err := baselineBehind(ctx, t, gen, endless, func(o *pipeline.Options) { o.MaxPackageSize = limit })
	if err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	t.Logf("%s; server sent %d bytes", strings.TrimSpace(rep.Summary()), sent.Load())
	var failed *runreport.Failure
	for i, f := range rep.Failures {
		if strings.Contains(f.URI+f.Package, "part-00001.zip") {
			failed = &rep.Failures[i]
		}
	}
	switch {
	case rep.Status != runreport.StatusPartial || rep.Packages.Failed != 1:
		t.Errorf("status %s, %d packages failed; want partial, the endless one failed", rep.Status, rep.Packages.Failed)
	case failed == nil || !failed.Permanent || !strings.Contains(failed.Error, fetch.ErrTooLarge.Error()) || !strings.Contains(failed.Error, strconv.Itoa(limit)):
		t.Errorf("the endless package's failure %+v does not say it is larger than the cap of %d bytes, permanently", failed, limit)
	}
	held := h.held(ctx)
	others := 0
	for uri := range truth {
		if !httpFaultPackageURIs(t, gen.Dir, "part-00001")[uri] {
			others++
			if _, ok := held[uri]; !ok {
				t.Errorf("%s, of another package, is not held", uri)
			}
		}
	}
	if others == 0 {
		t.Fatal("every resource is in the endless package")
	}
	if n := sent.Load(); n > 16*limit {
		t.Errorf("the server sent %d bytes before the download stopped (cap %d)", n, limit)
	}
	if left, _ := os.ReadDir(spool); len(left) != 0 {
		t.Errorf("the spool directory holds %d files after the run", len(left))
	}
}

// baselineBehind serves the generated source gen behind wrap and runs a
// baseline of it with a spool directory of its own and the options
// configure sets, returning the harness, that spool directory, and the
// run's report and error.
func baselineBehind(ctx context.Context, t *testing.T, gen bench.GenOptions, wrap func(http.Handler) http.Handler, configure func(*pipeline.Options)) (*harness, string, *runreport.Report, error) {
	t.Helper()
	srv, err := bench.Serve(ctx, gen.Dir, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := newHarness(t)
	spool := t.TempDir()
	opts := h.options(srv.URL)
	opts.SpoolDir = spool
	configure(&opts)
	rep, err := pipeline.Baseline(ctx, opts)
	return h, spool, rep, err
}
