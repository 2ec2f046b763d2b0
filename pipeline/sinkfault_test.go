package pipeline_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/s3"
	"github.com/rsharvest/rsharvest/sink/s3/s3test"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
	"github.com/rsharvest/rsharvest/state"
)

// The sink-fault tests: a sink that errors, slows down or goes away in the
// middle of a run. The pipeline retries a sink's temporary failures, then
// records what still fails; a checkpoint never passes a change that did
// not reach the sink; the next run with a healthy sink delivers the rest,
// and the sink then equals the source.

// sfDiff lists the URIs whose body in got differs from want's (missing,
// wrong or not in want), sorted.
func sfDiff(got, want map[string][]byte) []string {
	var out []string
	for uri, b := range want {
		if g, ok := got[uri]; !ok || !bytes.Equal(g, b) {
			out = append(out, uri)
		}
	}
	for uri := range got {
		if _, ok := want[uri]; !ok {
			out = append(out, uri)
		}
	}
	slices.Sort(out)
	return out
}

// sfFirst shows the first few of uris.
func sfFirst(uris []string) string {
	if len(uris) > 5 {
		return strings.Join(uris[:5], ", ") + ", …"
	}
	return strings.Join(uris, ", ")
}

// sfCheckState checks that the state store is never ahead of the sink: a
// resource it records as held is in the sink with the recorded digests, a
// resource it records as deleted is not in the sink.
func sfCheckState(t *testing.T, store *state.Store, held map[string][]byte) {
	t.Helper()
	sfCheckStateExcept(t, store, held, nil)
}

// sfCheckStateExcept is sfCheckState for every URI not in except.
func sfCheckStateExcept(t *testing.T, store *state.Store, held map[string][]byte, except map[string]bool) {
	t.Helper()
	n := 0
	err := store.WalkResources(t.Context(), "", func(r state.Resource) error {
		if except[r.URI] {
			return nil
		}
		b, has := held[r.URI]
		switch {
		case r.Deleted:
			if has {
				n++
				t.Errorf("the state records %s as deleted; the sink holds it", r.URI)
			}
		case r.Outcome == state.OutcomeWritten || r.Outcome == state.OutcomeUnchanged:
			m, s := md5.Sum(b), sha256.Sum256(b)
			if !has || r.Hashes.SHA256 != nil && !bytes.Equal(r.Hashes.SHA256, s[:]) || r.Hashes.MD5 != nil && !bytes.Equal(r.Hashes.MD5, m[:]) {
				n++
				t.Errorf("the state records %s as held (%d bytes); the sink holds %d bytes (present %v) with other digests", r.URI, r.Length, len(b), has)
			}
		}
		if n >= 5 {
			return fmt.Errorf("too many differences")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sfFailures splits a report's failures into temporary and permanent ones,
// by URI, and fails t on a failure of a stage other than "deliver".
func sfFailures(t *testing.T, rep *runreport.Report) (temporary, permanent map[string]bool) {
	t.Helper()
	temporary, permanent = map[string]bool{}, map[string]bool{}
	for _, f := range rep.Failures {
		if f.Stage != "deliver" {
			t.Errorf("failure at stage %s: %+v", f.Stage, f)
		}
		if f.Permanent {
			permanent[f.URI] = true
		} else {
			temporary[f.URI] = true
		}
	}
	return temporary, permanent
}

// TestSinkFaultsBaseline runs baselines into a faulty sink: temporary
// errors are retried away; errors that persist are recorded (temporary
// ones hold the checkpoint back, permanent ones do not) while everything
// else is delivered, and the next run with a healthy sink delivers the
// rest; a slow sink gets everything, never more calls at once than it
// takes.
func TestSinkFaultsBaseline(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 90, Packages: 3, Seed: 31, MeanSize: 1 << 10}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	truth := truthAfter(t, gen, 0)
	uris := slices.Sorted(maps.Keys(truth))
	// Two URIs whose writes always fail temporarily, two whose writes the
	// sink rejects for good.
	tempBad := map[string]bool{uris[3]: true, uris[40]: true}
	permBad := map[string]bool{uris[10]: true, uris[77]: true}
	const retries = 3
	tests := []struct {
		name string
		opts sinkfault.Options
		// wantTemp and wantPerm are the URIs that must fail; the others
		// must be delivered.
		wantTemp, wantPerm map[string]bool
		// putsPerURI, when set, is how many Puts each delivered URI got.
		putsPerURI int
		// maxInFlight, when set, is the concurrency the sink declares,
		// which the run must reach and never exceed.
		maxInFlight int
		// retries, when set, replaces the retries of a sink failure.
		retries int
	}{
		{name: "transient errors on every URI", putsPerURI: 3,
			opts: sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.FailFirst(2, sinkfault.Temporary("503 Service Unavailable"))}}},
		// Every 5th, not every 4th: with 4 workers taking turns, every 4th
		// call can be the same worker's, every retry of one URI failing.
		// The count is shared by the workers, so one URI's tries may still
		// land on multiples of 5 now and then under load: with 6 retries
		// all 7 would have to.
		{name: "a transient error on every 5th call", retries: 6,
			opts: sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.FailEvery(5, sinkfault.Temporary("connection reset by peer"))}}},
		{name: "a timeout (unclassified error) on the 5th call",
			opts: sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.FailNth(5, context.DeadlineExceeded)}}},
		{name: "persistent temporary and permanent errors", wantTemp: tempBad, wantPerm: permBad,
			opts: sinkfault.Options{Rules: []sinkfault.Rule{
				sinkfault.FailURIs(func(u string) bool { return tempBad[u] }, sinkfault.Temporary("503 Service Unavailable")),
				sinkfault.FailURIs(func(u string) bool { return permBad[u] }, sinkfault.Permanent("403 AccessDenied")),
			}}},
		{name: "permanent errors only", wantPerm: permBad,
			opts: sinkfault.Options{Rules: []sinkfault.Rule{
				sinkfault.FailURIs(func(u string) bool { return permBad[u] }, sinkfault.Permanent("403 AccessDenied")),
			}}},
		{name: "slow sink", putsPerURI: 1, maxInFlight: 2,
			opts: sinkfault.Options{Latency: 10 * time.Millisecond, Concurrency: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			faulty := sinkfault.New(h.sink, tt.opts)
			start := time.Now()
			rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
				o.Sinks = []sink.Sink{faulty}
				o.Workers = 4
				o.SinkRetries = cmp.Or(tt.retries, retries)
				o.SinkBackoff = time.Millisecond
			})
			elapsed := time.Since(start)
			st := faulty.Stats()
			t.Logf("%v: %s; sink %+v", elapsed.Round(time.Millisecond), rep.Summary(), st)
			bad := len(tt.wantTemp) + len(tt.wantPerm)
			wantStatus := runreport.StatusOK
			if bad > 0 {
				wantStatus = runreport.StatusPartial
			}
			if rep.Status != wantStatus || rep.Resources.Failed != int64(bad) || rep.Resources.Written != int64(len(truth)-bad) {
				t.Fatalf("status %s, want %s, with %d failed and %d written:\n%s", rep.Status, wantStatus, bad, len(truth)-bad, rep.Summary())
			}
			temp, perm := sfFailures(t, rep)
			if !maps.Equal(temp, tt.wantTemp) && len(temp)+len(tt.wantTemp) > 0 || !maps.Equal(perm, tt.wantPerm) && len(perm)+len(tt.wantPerm) > 0 {
				t.Fatalf("failed temporarily %v, permanently %v; want %v and %v", temp, perm, tt.wantTemp, tt.wantPerm)
			}
			// Retried as the class says: a temporary failure 1+retries
			// times, a permanent one once.
			for uri := range tt.wantTemp {
				if n := faulty.Calls(sinkfault.OpPut, uri); n != 1+retries {
					t.Errorf("%s failed temporarily after %d puts, want %d", uri, n, 1+retries)
				}
			}
			for uri := range tt.wantPerm {
				if n := faulty.Calls(sinkfault.OpPut, uri); n != 1 {
					t.Errorf("%s failed permanently after %d puts, want 1", uri, n)
				}
			}
			held := sinkBodies(t.Context(), t, h.sink)
			want := maps.Clone(truth)
			for uri := range tt.wantTemp {
				delete(want, uri)
			}
			for uri := range tt.wantPerm {
				delete(want, uri)
			}
			if d := sfDiff(held, want); len(d) > 0 {
				t.Fatalf("the sink differs from the source at %d URIs besides the failed ones: %s", len(d), sfFirst(d))
			}
			sfCheckState(t, h.store, held)
			if tt.putsPerURI > 0 {
				for _, uri := range uris {
					if n := faulty.Calls(sinkfault.OpPut, uri); n != tt.putsPerURI {
						t.Fatalf("%s: %d puts, want %d", uri, n, tt.putsPerURI)
					}
				}
			}
			if tt.maxInFlight > 0 && st.MaxInFlight != tt.maxInFlight {
				t.Errorf("at most %d puts in flight at once, want exactly the sink's concurrency %d", st.MaxInFlight, tt.maxInFlight)
			}
			if tt.maxInFlight > 0 {
				if floor := time.Duration(len(truth)/tt.maxInFlight) * tt.opts.Latency; elapsed < floor {
					t.Errorf("%d puts of %v each, %d at a time, took %v < %v", len(truth), tt.opts.Latency, tt.maxInFlight, elapsed, floor)
				}
			}
			// The checkpoint: held back by a temporary failure only.
			_, hasCP, err := h.store.Checkpoint(ctx, srv.URL, srv.URL+"capabilitylist.xml")
			if err != nil {
				t.Fatal(err)
			}
			if hasCP != (len(tt.wantTemp) == 0) {
				t.Fatalf("checkpoint set: %v, with %d temporary failures", hasCP, len(tt.wantTemp))
			}
			if fs, _, err := h.store.Failures(ctx, rep.RunID, 1000); err != nil || len(fs) != bad {
				t.Fatalf("the state store records %d failures (%v), want %d", len(fs), err, bad)
			}
			if bad == 0 {
				return
			}
			// The next run, with a healthy sink, delivers the rest.
			rep = h.baseline(ctx, srv.URL, nil)
			if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(bad) || rep.Resources.Unchanged != int64(len(truth)-bad) {
				t.Fatalf("second run: %s", rep.Summary())
			}
			held = sinkBodies(t.Context(), t, h.sink)
			if d := sfDiff(held, truth); len(d) > 0 {
				t.Fatalf("after the second run the sink differs from the source at %s", sfFirst(d))
			}
			sfCheckState(t, h.store, held)
			if _, ok, err := h.store.Checkpoint(ctx, srv.URL, srv.URL+"capabilitylist.xml"); err != nil || !ok {
				t.Fatalf("no checkpoint after a complete run (%v)", err)
			}
		})
	}
}

// TestSinkRetryBackoff: a sink's temporary failure is retried after
// Options.SinkBackoff, not after the backoff library's default first
// interval (500 ms ± 50 %).
func TestSinkRetryBackoff(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 24, Packages: 1, Seed: 33, MeanSize: 512}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	h := newHarness(t)
	var mu sync.Mutex
	first := map[string]time.Time{}
	var gaps []time.Duration
	faulty := sinkfault.New(h.sink, sinkfault.Options{
		Rules: []sinkfault.Rule{sinkfault.FailFirst(1, sinkfault.Temporary("503 Service Unavailable"))},
		Before: func(c sinkfault.Call) {
			mu.Lock()
			defer mu.Unlock()
			if c.NURI == 1 {
				first[c.URI] = time.Now()
			} else {
				gaps = append(gaps, time.Since(first[c.URI]))
			}
		},
	})
	const backoff = 2 * time.Millisecond
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{faulty}
		o.SinkBackoff = backoff
	})
	if rep.Status != runreport.StatusOK || len(gaps) != 24 {
		t.Fatalf("%d retries: %s", len(gaps), rep.Summary())
	}
	// The quickest retry shows the wait: the others may have waited for a
	// write slot or the CPU too.
	if q := slices.Min(gaps); q > 100*time.Millisecond {
		t.Errorf("the quickest retry came %v after the failure, with SinkBackoff %v", q, backoff)
	}
}

// TestSinkTransientIncremental: in an incremental run the first write (or
// the first delete) of every resource fails temporarily. Retries get every
// write and delete through: status ok, the sink equals the source, the
// checkpoint at the newest change.
func TestSinkTransientIncremental(t *testing.T) {
	ctx := t.Context()
	cs := newSFChangeSource(t, 120, 2, 50, 47)
	final := truthAfter(t, cs.gen, cs.steps)
	tests := []struct{ op sinkfault.Op }{{sinkfault.OpPut}, {sinkfault.OpDelete}}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			h := newHarness(t)
			cs.srv.Handler.Publish(0)
			if rep := h.baseline(ctx, cs.srv.URL, nil); rep.Status != runreport.StatusOK {
				t.Fatalf("baseline: %s", rep.Summary())
			}
			cs.srv.Handler.Publish(cs.steps)
			faulty := sinkfault.New(h.sink, sinkfault.Options{Rules: []sinkfault.Rule{
				sinkfault.Only(tt.op, sinkfault.FailFirst(1, sinkfault.Temporary("connection reset by peer")))}})
			opts := h.options(cs.srv.URL)
			opts.Sinks = []sink.Sink{faulty}
			opts.SinkBackoff = time.Millisecond
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{})
			if err != nil {
				t.Fatal(err)
			}
			st := faulty.Stats()
			t.Logf("%s; sink %+v", rep.Summary(), st)
			if st.Faults == 0 {
				t.Fatal("no faults: nothing tested")
			}
			held := sinkBodies(t.Context(), t, h.sink)
			sfCheckState(t, h.store, held)
			cp := cs.checkpoint(t, h.store)
			missing := cs.checkNotAhead(t, cp.Next, cs.steps, held, final)
			if rep.Status != runreport.StatusOK || missing > 0 || !cp.Next.Equal(cs.newest(cs.steps)) {
				t.Fatalf("status %s, %d resources undelivered, checkpoint %v (newest change %v); want ok, 0, the newest change",
					rep.Status, missing, cp.Next, cs.newest(cs.steps))
			}
		})
	}
}

// sfChangeSource is a generated source with a Change Dump, served for its
// own URL, and what is known of it.
type sfChangeSource struct {
	srv     *bench.Server
	gen     bench.GenOptions
	steps   int
	changes []bench.Change
	at      time.Time // the Resource Dump's snapshot: the baseline's checkpoint
}

func newSFChangeSource(t *testing.T, resources, steps, perPackage int, seed int64) *sfChangeSource {
	t.Helper()
	ctx := t.Context()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: resources, Packages: 2, Seed: seed, MeanSize: 1 << 10,
		ChangePackages: steps, ChangesPerPackage: perPackage, DeleteShare: 0.15}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	cs := &sfChangeSource{srv: srv, gen: gen, steps: steps, at: bench.DefaultAt()}
	if err := bench.ChangesIn(ctx, gen, func(c bench.Change) error {
		cs.changes = append(cs.changes, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkpoint returns the checkpoint of the source's resource set.
func (cs *sfChangeSource) checkpoint(t *testing.T, store *state.Store) state.Checkpoint {
	t.Helper()
	cp, ok, err := store.Checkpoint(t.Context(), cs.srv.URL, cs.srv.URL+"capabilitylist.xml")
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v (set: %v)", err, ok)
	}
	return cp
}

// newest is the time of the newest change of packages 1 to k.
func (cs *sfChangeSource) newest(k int) time.Time {
	var last time.Time
	for _, c := range cs.changes {
		if c.Package <= k && c.Time.After(last) {
			last = c.Time
		}
	}
	return last.UTC()
}

// checkNotAhead checks that a checkpoint next, set after packages 1 to k
// were applied to a sink that now holds held (what the source held after
// package `from` before the run), is at or before the earliest change that
// did not reach the sink: the next run, which starts at next, applies
// again every change it must. It returns the number of resources the sink
// still lacks (or holds wrong).
func (cs *sfChangeSource) checkNotAhead(t *testing.T, next time.Time, k int, held, truth map[string][]byte) int {
	t.Helper()
	// The change of each resource that counts: its latest in 1..k.
	latest := map[string]bench.Change{}
	for _, c := range cs.changes {
		if c.Package <= k {
			latest[c.URI] = c // in order: a later one replaces an earlier one
		}
	}
	undelivered := sfDiff(held, truth)
	var earliest time.Time
	for _, uri := range undelivered {
		c, ok := latest[uri]
		if !ok {
			t.Errorf("%s differs from the source, yet no change touched it", uri)
			continue
		}
		if earliest.IsZero() || c.Time.Before(earliest) {
			earliest = c.Time
		}
	}
	if len(undelivered) > 0 && next.After(earliest) {
		t.Errorf("the checkpoint %v is past the earliest undelivered change (%v): %d resources would never be delivered",
			next, earliest, len(undelivered))
	}
	return len(undelivered)
}

// TestSinkDisappearsIncremental: during an incremental run from a Change
// Dump the sink goes away (every call from then on fails as a refused
// connection would). The run retries, records the failures as temporary
// and ends partial; the state store is not ahead of the sink; the
// checkpoint stays at or before the earliest change the sink did not get.
// A second run with the sink back delivers the rest: the sink equals the
// source.
func TestSinkDisappearsIncremental(t *testing.T) {
	ctx := t.Context()
	cs := newSFChangeSource(t, 150, 3, 50, 41)
	final := truthAfter(t, cs.gen, cs.steps)
	tests := []struct {
		name string
		opts sinkfault.Options
	}{
		{"after 20 calls", sinkfault.Options{GoneAfterCalls: 20}},
		{"after the first call", sinkfault.Options{GoneAfterCalls: 1}},
		{"after 100 ms of a slow sink", sinkfault.Options{GoneAfter: 100 * time.Millisecond, Latency: 4 * time.Millisecond, Concurrency: 2}},
		{"at the 30th call, then transient errors", sinkfault.Options{GoneAfterCalls: 30,
			Rules: []sinkfault.Rule{sinkfault.FailEvery(7, sinkfault.Temporary("502 Bad Gateway"))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			cs.srv.Handler.Publish(0)
			if rep := h.baseline(ctx, cs.srv.URL, nil); rep.Status != runreport.StatusOK {
				t.Fatalf("baseline: %s", rep.Summary())
			}
			if cp := cs.checkpoint(t, h.store); !cp.Next.Equal(cs.at) {
				t.Fatalf("baseline checkpoint %v, want %v", cp.Next, cs.at)
			}
			cs.srv.Handler.Publish(cs.steps)
			faulty := sinkfault.New(h.sink, tt.opts)
			opts := h.options(cs.srv.URL)
			opts.Sinks = []sink.Sink{faulty}
			opts.SinkBackoff = time.Millisecond
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{})
			if err != nil {
				t.Fatalf("a sink that went away ended the run: %v", err)
			}
			st := faulty.Stats()
			t.Logf("%s; sink %+v", rep.Summary(), st)
			if rep.Status != runreport.StatusPartial || rep.Resources.Failed == 0 || st.GoneFailures == 0 {
				t.Fatalf("status %s with %d failures (%d calls to the gone sink), want partial:\n%s", rep.Status, rep.Resources.Failed, st.GoneFailures, rep.Summary())
			}
			if temp, perm := sfFailures(t, rep); len(perm) > 0 || len(temp) == 0 {
				t.Fatalf("failures: %d temporary, %d permanent (%v); a sink that went away fails temporarily", len(temp), len(perm), slices.Collect(maps.Keys(perm)))
			}
			for _, f := range rep.Failures {
				if !strings.Contains(f.Error, "connection refused") && !strings.Contains(f.Error, "502") {
					t.Fatalf("failure %+v does not say why", f)
				}
			}
			held := sinkBodies(t.Context(), t, h.sink)
			sfCheckState(t, h.store, held)
			cp := cs.checkpoint(t, h.store)
			if cp.Next.Before(cs.at) {
				t.Errorf("the checkpoint went back from %v to %v", cs.at, cp.Next)
			}
			missing := cs.checkNotAhead(t, cp.Next, cs.steps, held, final)
			if missing == 0 {
				t.Fatalf("the sink went away, yet it holds everything: the fault came too late to test anything")
			}
			t.Logf("after the faulty run: %d resources undelivered, checkpoint %v (newest change %v)", missing, cp.Next, cs.newest(cs.steps))

			// The sink is back: the next run delivers the rest.
			faulty.Reappear()
			rep = h.incremental(ctx, cs.srv.URL, pipeline.Range{})
			if rep.Status != runreport.StatusOK {
				t.Fatalf("second run: %s", rep.Summary())
			}
			held = sinkBodies(t.Context(), t, h.sink)
			if d := sfDiff(held, final); len(d) > 0 {
				t.Fatalf("after the second run the sink differs from the source at %d URIs: %s", len(d), sfFirst(d))
			}
			sfCheckState(t, h.store, held)
			if cp := cs.checkpoint(t, h.store); !cp.Next.Equal(cs.newest(cs.steps)) {
				t.Errorf("checkpoint after the second run %v, want the newest change %v", cp.Next, cs.newest(cs.steps))
			}
		})
	}
}

// TestSinkFaultS3ServerKilled: the S3 sink against a real MinIO that is
// killed (SIGKILL) in the middle of an incremental run, at the n-th write.
// The run records the writes that fail as temporary failures and ends
// partial; the checkpoint stays at or before the earliest change the
// bucket lacks. MinIO is started again over the same data; the next run
// completes the bucket, which then equals the source.
func TestSinkFaultS3ServerKilled(t *testing.T) {
	ctx := t.Context()
	minio := s3test.ForTest(t, s3test.Options{Memory: true})
	cs := newSFChangeSource(t, 80, 2, 40, 43)
	final := truthAfter(t, cs.gen, cs.steps)
	bucket, err := minio.NewBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s3opts := s3.Options{Endpoint: minio.Endpoint(), Bucket: bucket, Prefix: "mirror", AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Concurrency: 4}
	open := func() *s3.S3 {
		t.Helper()
		s, err := s3.New(ctx, s3opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	h := newHarness(t)
	run := func(sk sink.Sink, inc bool) *runreport.Report {
		t.Helper()
		opts := h.options(cs.srv.URL)
		opts.Sinks = []sink.Sink{sk}
		opts.SinkBackoff = time.Millisecond
		// Each write to a dead server already costs minio-go's own
		// retries (about a second): one retry of the pipeline's is enough.
		opts.SinkRetries = 1
		var rep *runreport.Report
		var err error
		if inc {
			rep, err = pipeline.Incremental(ctx, opts, pipeline.Range{})
		} else {
			rep, err = pipeline.Baseline(ctx, opts)
		}
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		return rep
	}
	cs.srv.Handler.Publish(0)
	if rep := run(open(), false); rep.Status != runreport.StatusOK {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	cs.srv.Handler.Publish(cs.steps)
	const killAt = 15
	var once sync.Once
	faulty := sinkfault.New(open(), sinkfault.Options{Before: func(c sinkfault.Call) {
		if c.N == killAt {
			once.Do(minio.Kill)
		}
	}})
	start := time.Now()
	rep := run(faulty, true)
	t.Logf("faulty run: %v, %s; sink %+v", time.Since(start).Round(time.Millisecond), rep.Summary(), faulty.Stats())
	if minio.Running() {
		t.Fatal("MinIO was not killed: the run made fewer writes than expected")
	}
	if rep.Status != runreport.StatusPartial || rep.Resources.Failed == 0 {
		t.Fatalf("status %s, want partial with failures:\n%s", rep.Status, rep.Summary())
	}
	for _, f := range rep.Failures {
		if f.Permanent || f.Stage != "deliver" {
			t.Fatalf("failure %+v: a server that went away fails temporarily, at delivery", f)
		}
	}
	if err := minio.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	sk := open()
	held := sinkBodies(t.Context(), t, sk)
	// A write in flight when MinIO was killed may have been stored
	// without its answer reaching the sink: it failed (temporarily) and
	// the bucket may hold the new version while the state keeps the old
	// one. The sink may be ahead of the state there, never behind: those
	// URIs are checked against the source after the next run.
	failed := map[string]bool{}
	for _, f := range rep.Failures {
		failed[f.URI] = true
	}
	sfCheckStateExcept(t, h.store, held, failed)
	cp := cs.checkpoint(t, h.store)
	missing := cs.checkNotAhead(t, cp.Next, cs.steps, held, final)
	if missing == 0 {
		t.Fatal("MinIO was killed, yet the bucket holds everything: the kill came too late to test anything")
	}
	t.Logf("after the faulty run: %d resources undelivered, checkpoint %v (newest change %v)", missing, cp.Next, cs.newest(cs.steps))

	rep = run(sk, true)
	if rep.Status != runreport.StatusOK {
		t.Fatalf("run after the restart: %s", rep.Summary())
	}
	held = sinkBodies(t.Context(), t, sk)
	if d := sfDiff(held, final); len(d) > 0 {
		t.Fatalf("after the restart and a run the bucket differs from the source at %d URIs: %s", len(d), sfFirst(d))
	}
	sfCheckState(t, h.store, held)
	if cp := cs.checkpoint(t, h.store); !cp.Next.Equal(cs.newest(cs.steps)) {
		t.Errorf("checkpoint %v, want the newest change %v", cp.Next, cs.newest(cs.steps))
	}
}
