//go:build unix

package cli

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/state"
)

// The crash tests prove that kill -9 at any moment — during discovery, a
// download, the unpacking, a sink write, a state commit — loses nothing and
// shows nothing half-written: the real binary runs as a child process, is
// killed with SIGKILL after a random delay, possibly several times in a
// row over the same sink and state store, and then runs to its end. Each
// test runs once per sink: the fs sink (a mirror directory), and the s3
// sink against a real MinIO the test starts on 127.0.0.1 (a bucket per
// harvester; see package sink/s3/s3test). After every kill:
//
//   - every file in the mirror, every object in the bucket, is at a path or
//     key of the layout of a URI the source has (or had), once, and holds
//     exactly a body the source publishes (or published) for it; an
//     object's ETag and stored sha-256 match its bytes; the raw listing and
//     the sink's own Inventory agree;
//   - the state store opens, passes SQLite's integrity check and is never
//     ahead of the sink: a resource it records as held is in the sink
//     with the recorded digests (unless a change the next run re-applies
//     covers it), a tombstone's resource is not;
//   - the checkpoint is never ahead of the sink: every resource the next
//     run will not touch again is already as the checkpoint says;
//   - nothing appears next to the sink and the state store.
//
// After the final run the sink equals the source and the state store
// equals that of an uninterrupted run. The seed of the random delays is
// logged; RSHARVEST_CRASH_SEED replays it, RSHARVEST_CRASH_ITERATIONS sets
// the number of kills of each sink's case (and lifts the time limit), and
// -run selects a case (TestCrashBaseline/s3). Each case logs its kills,
// the resources it compared with the source and how many were lost.

// crashStats counts where kills landed, as seen from what they left, and
// what they left outside the sink's content.
type crashStats struct {
	kills, sequences, finishedFirst int
	landed                          map[string]int // what a kill left → count
	sinkTmp                         int            // kills that left partial writes in the sink
	sinkTmpName                     string         // what those are
	spoolLeft, tmpLeft              int            // files left in --spool-dir / TMPDIR after the final runs
	leftNames                       map[string]bool
	running                         int // runs still "running" in the harvest log after the final runs
	extraChanges                    int // change log records beyond the reference's
	// checked counts the resources compared with the source after every
	// kill and every final run; lost those the sink lacked although the
	// state or the checkpoint said they were delivered, or lacked (or held
	// wrong) after a final run; wrong the bodies that were no version the
	// source published (half-written) or URIs it never had.
	checked, lost, wrong int
}

func (s *crashStats) note(what string) {
	if s.landed == nil {
		s.landed = map[string]int{}
	}
	s.landed[what]++
}

func (s *crashStats) log(t *testing.T, name string, elapsed time.Duration) {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.landed)) {
		fmt.Fprintf(&b, "; %s: %d", k, s.landed[k])
	}
	t.Logf("%s: %d kills in %d sequences in %v (%d runs ended before their kill)%s; %d kills left %s",
		name, s.kills, s.sequences, elapsed.Round(time.Millisecond), s.finishedFirst, b.String(), s.sinkTmp, s.sinkTmpName)
	t.Logf("%s: %d resources compared with the source after the kills and final runs: %d lost, %d wrong (half-written or foreign)",
		name, s.checked, s.lost, s.wrong)
	if s.extraChanges > 0 {
		t.Logf("note: after the final runs the change logs held %d records more than the uninterrupted run's (changes re-applied after a kill)", s.extraChanges)
	}
	if s.running > 0 {
		t.Logf("note: after the final, successful runs the harvest log still had %d runs with status %q (the killed ones)", s.running, state.StatusRunning)
	}
	if s.spoolLeft > 0 || s.tmpLeft > 0 {
		t.Logf("note: after the final, successful runs %d files of killed runs were still in --spool-dir, %d in TMPDIR (%s): no run removes them",
			s.spoolLeft, s.tmpLeft, strings.Join(slices.Sorted(maps.Keys(s.leftNames)), ", "))
	}
}

// afterFinal checks and counts what is left after a sequence's successful
// final run.
func (s *crashStats) afterFinal(t *testing.T, rg *crashRig, what string) {
	t.Helper()
	lo := rg.leftovers(t)
	if lo.sinkTmp != 0 && rg.sink.partialCleaned() {
		t.Errorf("%s: %d %s left after a successful run", what, lo.sinkTmp, rg.sink.partialName())
	}
	s.spoolLeft += lo.spool
	s.tmpLeft += lo.tmp
	if s.leftNames == nil {
		s.leftNames = map[string]bool{}
	}
	for _, n := range lo.names {
		s.leftNames[n] = true
	}
}

// crashFindings reports what is wrong after one kill, up to a few lines,
// and counts lost and wrong resources in st.
type crashFindings struct {
	t    *testing.T
	st   *crashStats
	when string
	n    int
}

const crashMaxFindings = 8

func (f *crashFindings) errorf(format string, a ...any) {
	f.t.Helper()
	if f.n++; f.n <= crashMaxFindings {
		f.t.Errorf("%s: "+format, append([]any{f.when}, a...)...)
	}
}

// lostf reports a resource the sink lacks although it should hold it.
func (f *crashFindings) lostf(format string, a ...any) {
	f.t.Helper()
	f.st.lost++
	f.errorf(format, a...)
}

// wrongf reports a body the source never published, or a URI it never had.
func (f *crashFindings) wrongf(format string, a ...any) {
	f.t.Helper()
	f.st.wrong++
	f.errorf(format, a...)
}

// done reports whether anything was found.
func (f *crashFindings) done() bool {
	f.t.Helper()
	if f.n > crashMaxFindings {
		f.t.Errorf("%s: … and %d more", f.when, f.n-crashMaxFindings)
	}
	return f.n > 0
}

// crashCheckHeld checks that a resource the state records as held is in the
// mirror with the recorded digests.
func crashCheckHeld(f *crashFindings, uri string, row crashResRow, mirror map[string]crashSums) {
	f.t.Helper()
	got, ok := mirror[uri]
	switch {
	case !ok:
		f.lostf("the state records %s as held, the mirror lacks it", uri)
	case row.SHA256 != "" && got.sha256 != row.SHA256, row.MD5 != "" && got.md5 != row.MD5, row.SHA256 == "" && row.MD5 == "":
		f.lostf("the state records %s with sha-256 %s, md5 %s; the mirror holds sha-256 %s", uri, row.SHA256, row.MD5, got.sha256)
	}
}

// crashCase is one sink the crash tests run the child with, and how many
// kills it gets by default in how much time (RSHARVEST_CRASH_ITERATIONS
// sets the kills of each case and lifts the time limit).
type crashCase struct {
	sink   string // "fs" or "s3"
	kills  int
	budget time.Duration
}

func TestCrashBaseline(t *testing.T) {
	ctx := t.Context()
	opts := bench.GenOptions{Dir: t.TempDir(), Resources: 1000, Packages: 8, Seed: 11, MeanSize: 2 << 10, IndexThreshold: 3}
	if _, err := bench.Generate(ctx, opts); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(ctx, opts.Dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	truth := crashTruth(t, opts, 0)
	bin := crashBuildBinary(t)
	for _, tc := range []crashCase{
		{sink: "fs", kills: 40, budget: 35 * time.Second},
		{sink: "s3", kills: 20, budget: 45 * time.Second},
	} {
		t.Run(tc.sink, func(t *testing.T) {
			crashBaseline(t, tc, bin, srv.URL, truth)
		})
	}
}

// crashBaseline kills baselines from source (whose resources are truth)
// into the sink of tc.
func crashBaseline(t *testing.T, tc crashCase, bin, source string, truth map[string]crashSums) {
	t0 := time.Now()
	seed := crashSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 1))
	kills, budget := crashBudget(t, tc.kills, tc.budget)
	tg := newCrashTarget(t, tc.sink, slices.Collect(maps.Keys(truth)))

	// The reference: one uninterrupted run.
	ref := newCrashRig(t, bin, source, tg)
	span := ref.finishChild(t, "baseline").elapsed
	if d := crashDiffSinks(ref.auditSink(t), truth); d != "" {
		t.Fatalf("uninterrupted run: the sink differs from the source:%s", d)
	}
	want := ref.snapState(t, true)
	if len(want.resources) != len(truth) || len(want.checkpoints) == 0 {
		t.Fatalf("uninterrupted run: %d resources recorded (want %d), %d checkpoints", len(want.resources), len(truth), len(want.checkpoints))
	}
	// A second one: the reference is reproducible, and a better estimate
	// of how long a run takes.
	again := newCrashRig(t, bin, source, tg)
	span = min(span, again.finishChild(t, "baseline").elapsed) // the first run may pay for cold caches
	if d := crashDiffStates(again.snapState(t, true), want); d != "" {
		t.Fatalf("two uninterrupted runs differ:%s", d)
	}
	t.Logf("uninterrupted run: %v", span.Round(time.Millisecond))

	st := crashStats{sinkTmpName: ref.sink.partialName()}
	for st.kills < kills && time.Since(t0) < budget && !t.Failed() {
		st.sequences++
		rg := newCrashRig(t, bin, source, tg)
		inRow, finished := 2+rnd.IntN(5), false
		for i := 0; i < inRow && st.kills < kills && !finished; i++ {
			delay := crashKillDelay(rnd, span, i)
			res := rg.syncChild(t, "baseline", delay)
			if i == 0 {
				span = crashAdaptSpan(span, delay, res)
			}
			if !res.killed {
				if res.code != ExitOK {
					t.Fatalf("run %d, not killed: exit %d\n%s", rg.runs, res.code, res.output)
				}
				st.finishedFirst++ // the final run of this sequence
				finished = true
				continue
			}
			st.kills++
			when := fmt.Sprintf("kill %v into run %d of sequence %d", delay.Round(time.Microsecond), rg.runs, st.sequences)
			f := &crashFindings{t: t, st: &st, when: when}
			if rg.leftovers(t).sinkTmp > 0 {
				st.sinkTmp++
			}
			mirror := rg.auditSink(t)
			st.checked += len(truth)
			for uri, s := range mirror {
				if want, ok := truth[uri]; !ok {
					f.wrongf("the sink holds %s, which the source does not have", uri)
				} else if s != want {
					f.wrongf("the sink holds a wrong (half-written?) body of %s", uri)
				}
			}
			snap := rg.snapState(t, false)
			held := 0
			for uri, row := range snap.resources {
				if row.Outcome != "held" || row.Deleted {
					f.errorf("state row of %s: %+v", uri, row)
					continue
				}
				held++
				crashCheckHeld(f, uri, row, mirror)
			}
			if len(snap.checkpoints) > 0 {
				st.note("checkpoint set")
				// The checkpoint says the baseline is complete.
				if d := crashDiffSinks(mirror, truth); d != "" {
					st.lost += crashLost(mirror, truth)
					f.errorf("a checkpoint is set but the sink is incomplete:%s", d)
				}
			}
			st.note(fmt.Sprintf("sink %s, state %s", crashShare(len(mirror), len(truth)), crashShare(held, len(truth))))
			if f.done() {
				t.Fatalf("after %s; output of the killed run:\n%s", when, res.output)
			}
		}
		if !finished {
			rg.finishChild(t, "baseline")
		}
		st.afterFinal(t, rg, fmt.Sprintf("sequence %d", st.sequences))
		final := rg.auditSink(t)
		st.checked += len(truth)
		if d := crashDiffSinks(final, truth); d != "" {
			st.lost += crashLost(final, truth)
			t.Errorf("sequence %d: after the final run the sink differs from the source:%s", st.sequences, d)
		}
		got := rg.snapState(t, true)
		st.running += got.runs[state.StatusRunning]
		st.extraChanges += crashExtraChanges(got, want)
		if d := crashDiffStates(got, want); d != "" {
			t.Errorf("sequence %d: after the final run the state differs from an uninterrupted run's:%s", st.sequences, d)
		}
	}
	st.log(t, "baseline, "+tc.sink, time.Since(t0))
}

// crashChangeSource is the source of the incremental crash tests: a
// Resource Dump and a Change Dump whose packages are published one step at
// a time, and what it holds at each step.
type crashChangeSource struct {
	srv      *bench.Server
	steps    int
	truths   []map[string]crashSums       // what the source holds after each step
	ever     map[string]map[crashSums]int // URI → body → first step holding it
	changes  []bench.Change
	boundary map[time.Time]int // where a checkpoint may stand → the step it ends
}

func TestCrashIncremental(t *testing.T) {
	ctx := t.Context()
	// The source is generated for the server's own URL, so that the
	// manifests inside the packages (served as they are) and the rewritten
	// documents agree on every URI.
	srcDir := t.TempDir()
	srv, err := bench.Serve(ctx, srcDir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const steps = 4
	opts := bench.GenOptions{Dir: srcDir, Base: srv.URL, Resources: 600, Packages: 4, Seed: 13, MeanSize: 8 << 10, IndexThreshold: 3,
		ChangePackages: steps, ChangesPerPackage: 150, DeleteShare: 0.1}
	if _, err := bench.Generate(ctx, opts); err != nil {
		t.Fatal(err)
	}
	// What the source holds after each step, every body it ever had, and
	// its changes.
	truths := make([]map[string]crashSums, steps+1)
	ever := map[string]map[crashSums]int{} // URI → body → first step holding it
	for k := range truths {
		truths[k] = crashTruth(t, opts, k)
		for uri, s := range truths[k] {
			if ever[uri] == nil {
				ever[uri] = map[crashSums]int{}
			}
			if _, ok := ever[uri][s]; !ok {
				ever[uri][s] = k
			}
		}
	}
	var changes []bench.Change
	if err := bench.ChangesIn(ctx, opts, func(c bench.Change) error {
		changes = append(changes, c)
		if ever[c.URI] == nil {
			ever[c.URI] = map[crashSums]int{} // created and deleted between two steps
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Where a checkpoint may stand: the snapshot's time after the
	// baseline, the newest change of package k after step k.
	last := make([]time.Time, steps+1)
	last[0] = cmp.Or(opts.At, bench.DefaultAt()).UTC()
	for _, c := range changes {
		if c.Time.After(last[c.Package]) {
			last[c.Package] = c.Time.UTC()
		}
	}
	boundary := map[time.Time]int{}
	for k, tm := range last {
		boundary[tm] = k
	}
	if len(boundary) != steps+1 {
		t.Fatalf("%d checkpoint positions, want %d: %v; first change %+v, last %+v", len(boundary), steps+1, boundary, changes[0], changes[len(changes)-1])
	}
	bin := crashBuildBinary(t)
	cs := &crashChangeSource{srv: srv, steps: steps, truths: truths, ever: ever, changes: changes, boundary: boundary}
	for _, tc := range []crashCase{
		{sink: "fs", kills: 30, budget: 35 * time.Second},
		{sink: "s3", kills: 20, budget: 45 * time.Second},
	} {
		t.Run(tc.sink, func(t *testing.T) {
			crashIncremental(t, tc, bin, cs)
		})
	}
}

// crashIncremental kills the runs of "sync" as the packages of cs's Change
// Dump are published, into the sink of tc.
func crashIncremental(t *testing.T, tc crashCase, bin string, cs *crashChangeSource) {
	t0 := time.Now()
	seed := crashSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 2))
	kills, budget := crashBudget(t, tc.kills, tc.budget)
	srv, steps, truths := cs.srv, cs.steps, cs.truths
	tg := newCrashTarget(t, tc.sink, slices.Collect(maps.Keys(cs.ever)))

	// The reference: "sync" at every step (a baseline first, then
	// incremental runs as each package is published), none interrupted.
	ref := newCrashRig(t, bin, srv.URL, tg)
	want := make([]crashStateSnap, steps+1)
	span := make([]time.Duration, steps+1)
	for k := 0; k <= steps; k++ {
		srv.Handler.Publish(k)
		span[k] = ref.finishChild(t, "sync").elapsed
		if d := crashDiffSinks(ref.auditSink(t), truths[k]); d != "" {
			t.Fatalf("uninterrupted step %d: the sink differs from the source:%s", k, d)
		}
		want[k] = ref.snapState(t, true)
		if len(want[k].checkpoints) != 1 {
			t.Fatalf("uninterrupted step %d: checkpoints %v", k, want[k].checkpoints)
		}
	}
	t.Logf("uninterrupted steps: %v", span)

	st := crashStats{sinkTmpName: ref.sink.partialName()}
	for st.kills < kills && time.Since(t0) < budget && !t.Failed() {
		st.sequences++
		rg := newCrashRig(t, bin, srv.URL, tg)
		for k := 0; k <= steps && !t.Failed(); k++ {
			srv.Handler.Publish(k)
			inRow, finished := 1+rnd.IntN(4), false
			if k == 0 {
				inRow = rnd.IntN(3) // baselines are TestCrashBaseline's concern
			}
			for i := 0; i < inRow && st.kills < kills && !finished; i++ {
				delay := crashKillDelay(rnd, span[k], i)
				res := rg.syncChild(t, "sync", delay)
				if i == 0 {
					span[k] = crashAdaptSpan(span[k], delay, res)
				}
				if !res.killed {
					if res.code != ExitOK {
						t.Fatalf("step %d, run %d, not killed: exit %d\n%s", k, rg.runs, res.code, res.output)
					}
					st.finishedFirst++
					finished = true
					continue
				}
				st.kills++
				when := fmt.Sprintf("kill %v into run %d (step %d) of sequence %d", delay.Round(time.Microsecond), rg.runs, k, st.sequences)
				if rg.leftovers(t).sinkTmp > 0 {
					st.sinkTmp++
				}
				if crashCheckAfterKill(&crashFindings{t: t, st: &st, when: when}, rg, k, cs) {
					t.Fatalf("after %s; output of the killed run:\n%s", when, res.output)
				}
			}
			if !finished {
				rg.finishChild(t, "sync")
			}
			st.afterFinal(t, rg, fmt.Sprintf("sequence %d, step %d", st.sequences, k))
			final := rg.auditSink(t)
			st.checked += len(truths[k])
			if d := crashDiffSinks(final, truths[k]); d != "" {
				st.lost += crashLost(final, truths[k])
				t.Errorf("sequence %d, step %d: after the final run the sink differs from the source:%s", st.sequences, k, d)
			}
			got := rg.snapState(t, true)
			if k == 0 {
				// A baseline killed after setting its checkpoint is
				// followed by an incremental sync of the (empty) Change
				// Dump, which marks the checkpoint open; an uninterrupted
				// baseline does not.
				for key, cp := range got.checkpoints {
					if w, ok := want[k].checkpoints[key]; ok && cp.Next.Equal(w.Next) && cp.Baseline.Equal(w.Baseline) {
						got.checkpoints[key] = w
					}
				}
			}
			if k == steps {
				st.running += got.runs[state.StatusRunning]
				st.extraChanges += crashExtraChanges(got, want[k])
			}
			if d := crashDiffStates(got, want[k]); d != "" {
				t.Errorf("sequence %d, step %d: after the final run the state differs from an uninterrupted run's:%s", st.sequences, k, d)
			}
		}
	}
	st.log(t, "incremental, "+tc.sink, time.Since(t0))
}

// crashCheckAfterKill checks what a child killed during step k (Change Dump
// packages 1 to k published) left behind.
// It reports whether it found anything wrong.
func crashCheckAfterKill(f *crashFindings, rg *crashRig, k int, cs *crashChangeSource) bool {
	t, st := f.t, f.st
	t.Helper()
	truths, ever, changes, boundary := cs.truths, cs.ever, cs.changes, cs.boundary
	// Every file holds a body its URI had at some step up to k.
	mirror := rg.auditSink(t)
	st.checked += len(ever)
	for uri, s := range mirror {
		if first, ok := ever[uri][s]; !ok || first > k {
			f.wrongf("the sink holds a body of %s the source never published by step %d (half-written?)", uri, k)
		}
	}
	snap := rg.snapState(t, false)
	if len(snap.checkpoints) > 1 {
		f.errorf("checkpoints %v", snap.checkpoints)
	}
	// A resource the next run applies a change to again may be anything
	// (of the above) in the mirror and the state; every other one must be
	// settled.
	var next time.Time
	hasCP, j := false, 0
	for _, cp := range snap.checkpoints {
		next, hasCP = cp.Next, true
		var ok bool
		if j, ok = boundary[cp.Next]; !ok {
			f.errorf("the checkpoint %v is not where any step ends", cp.Next)
		} else if j > k {
			f.errorf("the checkpoint %v is at step %d, ahead of what is published (step %d)", cp.Next, j, k)
		}
	}
	again := map[string]bool{}
	if hasCP {
		for _, c := range changes {
			if c.Package <= k && !c.Time.Before(next) {
				again[c.URI] = true
			}
		}
	}
	// The state store is never ahead of the mirror.
	for uri, row := range snap.resources {
		switch {
		case again[uri]:
		case row.Deleted:
			if _, ok := mirror[uri]; ok {
				f.wrongf("the state records %s as deleted, the sink holds it", uri)
			}
		case row.Outcome == "held":
			crashCheckHeld(f, uri, row, mirror)
		default:
			f.errorf("state row of %s: %+v", uri, row)
		}
	}
	// The checkpoint is never ahead of the mirror: every resource the next
	// run will not touch again is as it was after step j.
	if hasCP {
		for uri := range ever {
			if again[uri] {
				continue
			}
			want, ok := truths[j][uri]
			got, has := mirror[uri]
			switch {
			case ok && !has:
				f.lostf("the checkpoint stands after step %d, yet the sink lacks %s", j, uri)
			case !ok && has:
				f.errorf("the checkpoint stands after step %d, yet the sink still holds %s", j, uri)
			case ok && got != want:
				f.lostf("the checkpoint stands after step %d, yet the sink holds another version of %s", j, uri)
			}
		}
	}
	if k > 0 && !hasCP {
		f.errorf("no checkpoint")
	}
	where := "between"
	switch {
	case maps.Equal(mirror, truths[k]):
		where = fmt.Sprintf("as after step %d", k)
	case k > 0 && maps.Equal(mirror, truths[k-1]):
		where = fmt.Sprintf("as after step %d", k-1)
	case len(mirror) == 0:
		where = "empty"
	}
	cpAt := "none"
	if hasCP {
		cpAt = fmt.Sprintf("after step %d", j)
	}
	st.note(fmt.Sprintf("step %d: sink %s, checkpoint %s", k, where, cpAt))
	return f.done()
}

// crashLost counts the resources of want that got lacks or holds with
// another body.
func crashLost(got, want map[string]crashSums) int {
	n := 0
	for uri, w := range want {
		if g, ok := got[uri]; !ok || g != w {
			n++
		}
	}
	return n
}

// crashShare describes n of all: "empty", "partial" or "complete".
func crashShare(n, all int) string {
	switch {
	case n == 0:
		return "empty"
	case n < all:
		return "partial"
	}
	return "complete"
}
