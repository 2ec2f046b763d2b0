//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// The soak test runs the real binary against a source that injects faults
// (bench.FaultInjector, transient kinds, a fixed seed) through a baseline
// and as many catch-ups as its duration allows, the source publishing one
// more Change Dump package before each. Runs may end partial (exit 1) or
// fail to read the source (exit 3) while the faults last; each next run
// picks up where the last stopped. Then the faults stop and a final sync
// must succeed, after which the fs mirror equals the source after the last
// published package, the state store agrees with the mirror, and nothing
// is left in the spool and temporary directories. The test logs the faults
// injected by kind, the retries, resumes and restarts the harvester made,
// and the resources lost (which must be 0).
//
// RSHARVEST_SOAK sets the duration (a Go duration; default 40s, 10s with
// -short), RSHARVEST_SOAK_SEED the fault seed (default 1):
//
//	RSHARVEST_SOAK=10m go test -run TestSoak -timeout 30m ./cli/

// soakFaults are the faults of the soak: every kind a retrying, resuming
// client survives, in an eighth of the requests, with stalls that trip the
// harvester's --stall-timeout of 1s. Resumes (requests with a Range
// header), where Range ignored and ETag changed apply, get a fault in half
// the cases, those two kinds weighing more.
func soakFaults(seed uint64) bench.Faults {
	return bench.Faults{Seed: seed, Rate: 0.125, ResumeRate: 0.5, Kinds: bench.TransientFaultKinds(), RetryAfter: time.Second,
		Weights:     map[bench.FaultKind]float64{bench.FaultRangeIgnored: 3, bench.FaultETagChanged: 3},
		StormLength: 3, StallFor: 3 * time.Second, DripChunk: 512, DripDelay: 5 * time.Millisecond, DripMax: 500 * time.Millisecond}
}

// soakDuration is RSHARVEST_SOAK, or the default.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	d := 40 * time.Second
	if testing.Short() {
		d = 10 * time.Second
	}
	if s := os.Getenv("RSHARVEST_SOAK"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			t.Fatalf("RSHARVEST_SOAK=%q: want a positive Go duration", s)
		}
		d = v
	}
	return d
}

// soakRunner runs the binary over one mirror, state store and spool.
type soakRunner struct {
	bin, source, work string
	runs              int
	codes             map[int]int // exit code → runs
	fetch             runreport.FetchStats
	failed            int64 // resources that failed in some run (retried later)
}

func (s *soakRunner) mirror() string { return filepath.Join(s.work, "mirror") }
func (s *soakRunner) db() string     { return filepath.Join(s.work, "state.db") }
func (s *soakRunner) spool() string  { return filepath.Join(s.work, "spool") }
func (s *soakRunner) tmp() string    { return filepath.Join(s.work, "tmp") }

// run runs "rsharvest CMD" with the soak's flags and returns its exit code
// and output. Every run has at most three minutes.
func (s *soakRunner) run(t *testing.T, cmdName string, extra ...string) (int, string) {
	t.Helper()
	s.runs++
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	report := filepath.Join(s.work, "report.json")
	os.Remove(report)
	args := []string{cmdName, "--source", s.source, "--sink", "fs:" + s.mirror(), "--state", s.db(), "--spool-dir", s.spool(),
		"--progress", "none", "--log-level", "error", "--concurrency", "3", "--workers", "2", "--retries", "5", "--stall-timeout", "1s"}
	if cmdName != "audit" {
		args = append(args, "--report", report)
	}
	cmd := exec.CommandContext(ctx, s.bin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+s.tmp())
	cmd.Dir = s.work
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("run %d (%s) did not finish within three minutes\n%s", s.runs, cmdName, out.String())
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %d (%s): %v", s.runs, cmdName, err)
	}
	if cmdName != "audit" {
		s.codes[code]++
		if b, err := os.ReadFile(report); err == nil {
			var rep runreport.Report
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("run %d: report: %v", s.runs, err)
			}
			s.fetch.Requests += rep.Fetch.Requests
			s.fetch.Retries += rep.Fetch.Retries
			s.fetch.Resumes += rep.Fetch.Resumes
			s.fetch.Restarts += rep.Fetch.Restarts
			s.failed += rep.Resources.Failed
		}
	}
	return code, out.String()
}

// sync runs "rsharvest sync" while faults are on: it may end partial or
// fail to read the source, never otherwise.
func (s *soakRunner) sync(t *testing.T) int {
	t.Helper()
	code, out := s.run(t, "sync")
	switch code {
	case ExitOK, ExitPartial, ExitSource:
	default:
		t.Fatalf("run %d: exit %d under transient faults\n%s", s.runs, code, out)
	}
	return code
}

// held reads the mirror through the fs sink: URI → digests.
func (s *soakRunner) held(t *testing.T) map[string]crashSums {
	t.Helper()
	ctx := t.Context()
	sk, err := fs.New(s.mirror(), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	out := map[string]crashSums{}
	err = sk.Walk(ctx, func(uri string) error {
		rc, err := sk.Get(ctx, uri)
		if err != nil {
			return err
		}
		defer rc.Close()
		out[uri], err = crashSumOf(rc)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkState checks the state store against the mirror: every resource
// held is recorded as held with its digests, every other record is a
// tombstone of a resource the mirror does not hold, and there is one
// checkpoint. It returns the number of problems (the first few reported).
func (s *soakRunner) checkState(t *testing.T, mirror map[string]crashSums) int {
	t.Helper()
	ctx := t.Context()
	st, err := state.Open(ctx, s.db())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	problems := 0
	report := func(format string, a ...any) {
		if problems++; problems <= 5 {
			t.Errorf("state: "+format, a...)
		}
	}
	recorded := map[string]bool{}
	err = st.WalkResources(ctx, "", func(r state.Resource) error {
		got, has := mirror[r.URI]
		switch {
		case r.Deleted:
			if has {
				report("%s is a tombstone, the mirror holds it", r.URI)
			}
		case r.Outcome != state.OutcomeWritten && r.Outcome != state.OutcomeUnchanged:
			report("%s: outcome %q", r.URI, r.Outcome)
		case !has:
			report("%s recorded as held, not in the mirror", r.URI)
		case fmt.Sprintf("%x", r.Hashes.SHA256) != got.sha256:
			report("%s recorded with sha-256 %x, the mirror holds %s", r.URI, r.Hashes.SHA256, got.sha256)
		default:
			recorded[r.URI] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for uri := range mirror {
		if !recorded[uri] {
			report("the mirror holds %s, the state does not record it as held", uri)
		}
	}
	if n, err := st.CountResources(ctx, "", false); err != nil || n != int64(len(mirror)) {
		report("CountResources = %d (%v), the mirror holds %d", n, err, len(mirror))
	}
	return problems
}

func TestSoak(t *testing.T) {
	t0 := time.Now()
	dur := soakDuration(t)
	seed := uint64(1)
	if v := os.Getenv("RSHARVEST_SOAK_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("RSHARVEST_SOAK_SEED=%q: %v", v, err)
		}
	}
	ctx := t.Context()
	inj, err := bench.NewFaultInjector(soakFaults(seed))
	if err != nil {
		t.Fatal(err)
	}
	// The source is generated for the server's own URL, so that the
	// manifests inside the packages and the rewritten documents agree on
	// every URI (as in TestCrashIncremental).
	srcDir := t.TempDir()
	srv, err := bench.Serve(ctx, srcDir, "127.0.0.1:0", bench.ServeOptions{Wrap: inj.Wrap, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// A step takes a second or two: enough packages for the duration.
	steps := min(2000, max(8, int(dur/time.Second)+8))
	opts := bench.GenOptions{Dir: srcDir, Base: srv.URL, Resources: 800, Packages: 6, Seed: 29, MeanSize: 4 << 10, IndexThreshold: 4,
		ChangePackages: steps, ChangesPerPackage: 30, DeleteShare: 0.1, CreateShare: 0.1}
	if _, err := bench.Generate(ctx, opts); err != nil {
		t.Fatal(err)
	}
	srv.Handler.Publish(0)
	inj.SetEnabled(false) // no faults while building
	bin := crashBuildBinary(t)
	inj.SetEnabled(true)
	s := &soakRunner{bin: bin, source: srv.URL, work: t.TempDir(), codes: map[int]int{}}
	for _, d := range []string{s.spool(), s.tmp()} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	deadline := start.Add(dur)

	// The baseline, under faults, until one run succeeds (at most 10),
	// then a fault-free audit of it.
	for i := 0; s.sync(t) != ExitOK; i++ {
		if i == 10 {
			t.Fatalf("10 baselines under faults and none succeeded; codes %v", s.codes)
		}
	}
	inj.SetEnabled(false)
	if code, out := s.run(t, "audit"); code != ExitOK {
		t.Fatalf("audit after the baseline: exit %d\n%s", code, out)
	}
	inj.SetEnabled(true)

	// Catch-ups: publish the next package, sync, until the time is used.
	step := 0
	for step < steps && time.Now().Before(deadline) {
		step++
		srv.Handler.Publish(step)
		s.sync(t)
	}
	soaked := time.Since(start)
	faults := inj.Stats()

	// The faults stop; a final sync succeeds and leaves the mirror equal
	// to the source.
	inj.SetEnabled(false)
	if code, out := s.run(t, "sync"); code != ExitOK {
		t.Fatalf("the final, fault-free sync: exit %d\n%s", code, out)
	}
	mirror := s.held(t)
	truth := crashTruth(t, opts, step)
	lost := 0
	for uri, want := range truth {
		if mirror[uri] != want {
			lost++
		}
	}
	extra := 0
	for uri := range mirror {
		if _, ok := truth[uri]; !ok {
			extra++
		}
	}
	if d := crashDiffSinks(mirror, truth); d != "" {
		t.Errorf("after step %d the mirror differs from the source:%s", step, d)
	}
	problems := s.checkState(t, mirror)
	// Nothing was left behind by the runs (none was killed).
	for _, d := range []string{s.spool(), s.tmp(), filepath.Join(s.mirror(), ".rsharvest-tmp")} {
		left, _ := os.ReadDir(d)
		left = slices.DeleteFunc(left, func(e os.DirEntry) bool { return e.Name() == "%rsharvest-sink" }) // the fs sink's mark
		if len(left) > 0 {
			t.Errorf("%d files left in %s", len(left), d)
		}
	}
	codes, syncs := make([]string, 0, len(s.codes)), 0
	for _, c := range slices.Sorted(maps.Keys(s.codes)) {
		codes = append(codes, fmt.Sprintf("exit %d: %d", c, s.codes[c]))
		syncs += s.codes[c]
	}
	t.Logf("soak of %v (seed %d): a baseline and %d catch-ups (%d change packages published) in %d syncs (%s, the last one fault-free), %d resources failed in some run and were retried",
		soaked.Round(time.Millisecond), seed, step, step, syncs, strings.Join(codes, ", "), s.failed)
	t.Logf("faults injected: %v", faults)
	t.Logf("harvester: %d requests, %d retries, %d resumes, %d restarts", s.fetch.Requests, s.fetch.Retries, s.fetch.Resumes, s.fetch.Restarts)
	t.Logf("resources lost: %d (missing or wrong) of %d, %d extra; state problems: %d; total %v", lost, len(truth), extra, problems, time.Since(t0).Round(time.Millisecond))
	if lost != 0 || extra != 0 {
		t.Errorf("%d resources lost, %d extra", lost, extra)
	}
	if faults.Faulted == 0 || s.fetch.Retries+s.fetch.Resumes+s.fetch.Restarts == 0 {
		t.Errorf("the soak injected %d faults and the harvester retried nothing", faults.Faulted)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeFaultFlags runs "rsharvest serve" with fault flags in-process:
// the faults named are injected where targeted, and their counts are
// printed when the server stops. Bad flags are usage errors.
func TestServeFaultFlags(t *testing.T) {
	dir := t.TempDir()
	if _, err := bench.Generate(t.Context(), bench.GenOptions{Dir: dir, Resources: 20, Packages: 2, Seed: 3, MeanSize: 1 << 10}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want map[string]int // path → status
		out  string
	}{
		{"throttle packages", []string{"--fault-rate", "1", "--faults", "throttle", "--fault-targets", "packages", "--fault-retry-after", "3s"},
			map[string]int{"resourcedump.xml": 200, "packages/part-00001.zip": 429, "packages/part-00002.zip": 429},
			"faults injected: 2 faults in 2 requests: throttle 2"},
		{"storm on one path", []string{"--fault-rate", "1", "--faults", "storm", "--fault-storm-length", "1", "--fault-storm-codes", "502",
			"--fault-path", "part-00002", "--fault-seed", "9"},
			map[string]int{"packages/part-00001.zip": 200, "packages/part-00002.zip": 502},
			"faults injected: 1 faults in 1 requests: storm 1 (1 storms)"},
		{"no faults", nil, map[string]int{"packages/part-00001.zip": 200}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out, errb syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- Main(ctx, append([]string{"serve", "--dir", dir}, tc.args...), &out, &errb)
			}()
			base := servedURL(&out, `at (http://127\.0\.0\.1:[0-9]+/)`)
			if base == "" {
				cancel()
				t.Fatalf("serve did not start: %s %s", out.String(), errb.String())
			}
			for _, p := range slices.Sorted(maps.Keys(tc.want)) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want[p] {
					t.Errorf("%s: %d, want %d", p, resp.StatusCode, tc.want[p])
				}
				if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
					t.Errorf("%s: 429 without Retry-After", p)
				}
			}
			cancel()
			if code := <-done; code != ExitOK {
				t.Fatalf("serve: exit %d\n%s", code, errb.String())
			}
			if got := out.String(); !strings.Contains(got, tc.out) || (tc.out == "") == strings.Contains(got, "faults injected") {
				t.Errorf("output %q, want %q", got, tc.out)
			}
		})
	}
	for _, bad := range [][]string{{"--fault-rate", "2"}, {"--fault-rate", "0.5", "--faults", "gremlins"}, {"--fault-rate", "0.5", "--fault-path", "("},
		{"--fault-rate", "0.5", "--fault-storm-codes", "404"}, {"--fault-rate", "-1"}} {
		var out, errb syncBuffer
		if code := Main(t.Context(), append([]string{"serve", "--dir", dir}, bad...), &out, &errb); code != ExitUsage {
			t.Errorf("serve %v: exit %d, want %d (%s)", bad, code, ExitUsage, errb.String())
		}
	}
}
