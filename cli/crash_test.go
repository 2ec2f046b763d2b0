//go:build unix

package cli

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// The crash tests prove that kill -9 at any moment — during discovery, a
// download, the unpacking, a sink write, a state commit — loses nothing and
// shows nothing half-written: the real binary runs as a child process, is
// killed with SIGKILL after a random delay, possibly several times in a
// row over the same mirror and state store, and then runs to its end. After
// every kill:
//
//   - every file in the mirror is at a path of the layout and holds exactly
//     the body the source publishes (or published) for its URI;
//   - the state store opens, passes SQLite's integrity check and is never
//     ahead of the mirror: a resource it records as held is in the mirror
//     with the recorded digests (unless a change the next run re-applies
//     covers it), a tombstone's resource is not;
//   - the checkpoint is never ahead of the mirror: every resource the next
//     run will not touch again is already as the checkpoint says;
//   - nothing appears next to the mirror and the state store.
//
// After the final run the mirror equals the source and the state store
// equals that of an uninterrupted run. The seed of the random delays is
// logged; RSHARVEST_CRASH_SEED replays it, RSHARVEST_CRASH_ITERATIONS sets
// the number of kills.

// crashStats counts where kills landed, as seen from what they left.
type crashStats struct {
	kills, finishedFirst  int
	emptyMirror, partial  int // mirror: nothing yet / some resources
	complete              int // mirror complete at the kill
	noState, stateSome    int // state rows: none / some
	stateAll, checkpoint  int // state rows: all; checkpoint set
	sinkTmp, spool, tmpFs int // kills that left sink temporary / spool / TMPDIR files
	spoolFiles            int // spool files left in all
	sequences             int
}

func (s *crashStats) log(t *testing.T, name string, elapsed time.Duration) {
	t.Helper()
	t.Logf("%s: %d kills in %d sequences in %v (%d runs finished before their kill); at the kill the mirror was "+
		"empty %d, partial %d, complete %d times; the state had no resources %d, some %d, all %d, a checkpoint %d times",
		name, s.kills, s.sequences, elapsed.Round(time.Millisecond), s.finishedFirst, s.emptyMirror, s.partial, s.complete,
		s.noState, s.stateSome, s.stateAll, s.checkpoint)
	if s.spool > 0 || s.tmpFs > 0 {
		t.Logf("note: %d kills left %d spool files (rsharvest-pkg-*.zip, rsharvest-plan-*.db) in --spool-dir that no later run removes; %d left files in TMPDIR",
			s.spool, s.spoolFiles, s.tmpFs)
	}
	t.Logf("%d kills left temporary files in the sink's %s (removed by the next run)", s.sinkTmp, sinkTmpDir)
}

func (s *crashStats) noteLeftovers(lo leftovers) {
	if lo.sinkTmp > 0 {
		s.sinkTmp++
	}
	if lo.spool > 0 {
		s.spool++
	}
	if lo.tmp > 0 {
		s.tmpFs++
	}
	s.spoolFiles = max(s.spoolFiles, lo.spool)
}

// checkHeld checks that a resource the state records as held is in the
// mirror with the recorded digests.
func checkHeld(t *testing.T, when, uri string, row resRow, mirror map[string]sums) {
	t.Helper()
	got, ok := mirror[uri]
	switch {
	case !ok:
		t.Errorf("%s: the state records %s as held (%s), the mirror lacks it", when, uri, row.Outcome)
	case row.SHA256 != "" && got.sha256 != row.SHA256, row.MD5 != "" && got.md5 != row.MD5, row.SHA256 == "" && row.MD5 == "":
		t.Errorf("%s: the state records %s with sha-256 %s, md5 %s; the mirror holds sha-256 %s", when, uri, row.SHA256, row.MD5, got.sha256)
	}
}

func TestCrashBaseline(t *testing.T) {
	t0 := time.Now()
	seed := crashSeed(t)
	rnd := rand.New(rand.NewPCG(seed, 1))
	kills := crashIterations(t, 40, 12)
	ctx := t.Context()
	opts := bench.GenOptions{Dir: t.TempDir(), Resources: 400, Packages: 8, Seed: 11, MeanSize: 8 << 10, IndexThreshold: 3}
	if _, err := bench.Generate(ctx, opts); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(ctx, opts.Dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	truth := truthSums(t, opts, 0)
	bin := buildRsharvest(t)

	// The reference: one uninterrupted run.
	ref := newRig(t, bin, "baseline", srv.URL)
	span := ref.finishChild(t).elapsed
	if d := diffSinks(ref.auditSink(t), truth); d != "" {
		t.Fatalf("uninterrupted run: mirror differs from the source:%s", d)
	}
	want := ref.snapState(t)
	if len(want.resources) != len(truth) || len(want.checkpoints) == 0 {
		t.Fatalf("uninterrupted run: %d resources recorded (want %d), %d checkpoints", len(want.resources), len(truth), len(want.checkpoints))
	}
	t.Logf("uninterrupted run: %v; kills at uniform random points of [0, %v]", span.Round(time.Millisecond), span.Round(time.Millisecond))

	var st crashStats
	for st.kills < kills && !t.Failed() {
		st.sequences++
		rg := newRig(t, bin, "baseline", srv.URL)
		inRow := 1 + rnd.IntN(4)
		for i := 0; i < inRow && st.kills < kills; i++ {
			delay := killDelay(rnd, span)
			res := rg.syncChild(t, delay)
			if !res.killed {
				if res.code != ExitOK {
					t.Fatalf("run %d, not killed: exit %d\n%s", rg.runs, res.code, res.output)
				}
				st.finishedFirst++ // and the next run finds everything unchanged
				continue
			}
			st.kills++
			when := fmt.Sprintf("kill %v into run %d of sequence %d", delay.Round(time.Microsecond), rg.runs, st.sequences)
			st.noteLeftovers(rg.leftovers(t))
			mirror := rg.auditSink(t)
			for uri, s := range mirror {
				if want, ok := truth[uri]; !ok {
					t.Errorf("%s: the mirror holds %s, which the source does not have", when, uri)
				} else if s != want {
					t.Errorf("%s: the mirror holds a wrong (half-written?) body of %s", when, uri)
				}
			}
			snap := rg.snapState(t)
			held := 0
			for uri, row := range snap.resources {
				if row.Outcome != "held" || row.Deleted {
					t.Errorf("%s: state row of %s: %+v", when, uri, row)
					continue
				}
				held++
				checkHeld(t, when, uri, row, mirror)
			}
			if len(snap.checkpoints) > 0 {
				st.checkpoint++
				// The checkpoint says the baseline is complete.
				if d := diffSinks(mirror, truth); d != "" {
					t.Errorf("%s: a checkpoint is set but the mirror is incomplete:%s", when, d)
				}
			}
			switch {
			case len(mirror) == 0:
				st.emptyMirror++
			case len(mirror) < len(truth):
				st.partial++
			default:
				st.complete++
			}
			switch {
			case held == 0:
				st.noState++
			case held < len(truth):
				st.stateSome++
			default:
				st.stateAll++
			}
			if t.Failed() {
				t.Fatalf("after %s; output of the killed run:\n%s", when, res.output)
			}
		}
		// The final run of the sequence.
		rg.finishChild(t)
		if lo := rg.leftovers(t); lo.sinkTmp != 0 {
			t.Errorf("sequence %d: %d temporary files left in the sink after a successful run", st.sequences, lo.sinkTmp)
		}
		if d := diffSinks(rg.auditSink(t), truth); d != "" {
			t.Errorf("sequence %d: after the final run the mirror differs from the source:%s", st.sequences, d)
		}
		if d := diffStates(rg.snapState(t), want); d != "" {
			t.Errorf("sequence %d: after the final run the state differs from an uninterrupted run's:%s", st.sequences, d)
		}
	}
	st.log(t, "baseline", time.Since(t0))
}
