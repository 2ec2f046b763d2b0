package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// sourceBatch is a commit of n new resources of src, each with its change.
func sourceBatch(src string, run int64, tag string, n int) Batch {
	var b Batch
	now := time.Now()
	for i := range n {
		uri := fmt.Sprintf("%sr/%s/%d", src, tag, i)
		b.Resources = append(b.Resources, Resource{URI: uri, Source: src, Length: 1, Type: "text/plain", ChangeTime: now,
			Package: src + "p.zip", Outcome: OutcomeWritten, RunID: run})
		b.Changes = append(b.Changes, ChangeRecord{URI: uri, Change: ChangeCreated, Datetime: now, RunID: run, Package: src + "p.zip",
			Source: src, Length: 1, Type: "text/plain"})
	}
	return b
}

// TestCommitsOfSourcesAtOnce: on PostgreSQL, while a transaction holds
// source A's lock, source B commits (and its changes are stamped in its
// own order); A's next commit, and a writer of the whole store, wait for
// A's transaction to end.
func TestCommitsOfSourcesAtOnce(t *testing.T) {
	s, _ := openPostgresTemp(t)
	ctx := t.Context()
	run := mustRun(t, s)
	const a, b = "http://a.example/", "http://b.example/"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Commit(ctx, sourceBatch(a, run, "0", 3)))
	txA, err := s.beginSources(ctx, func() []string { return []string{a} })
	must(err)
	// B commits while A's lock is held: it does not wait for it.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range 3 {
		must(s.Commit(bctx, sourceBatch(b, run, fmt.Sprint(i), 5)))
	}
	// A's next commit, and a whole-store writer, cannot go on while A's
	// transaction holds its lock: each gives up at its deadline.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	if err := s.Commit(short, sourceBatch(a, run, "1", 3)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("A's commit while A's lock is held: %v, want it to wait (deadline exceeded)", err)
	}
	cancelShort()
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	if tx, err := s.beginWrite(short); err == nil {
		_ = tx.Rollback()
		t.Error("a writer of the whole store began while a source's commit held its lock")
	}
	cancelShort()
	must(txA.Rollback())
	must(s.Commit(ctx, sourceBatch(a, run, "1", 3)))
	// Each source's stamps increase in its commit order.
	must(s.View(ctx, func(v *Snapshot) error {
		for src, want := range map[string]int{a: 6, b: 15} {
			var prev time.Time
			n := 0
			if err := v.WalkChanges(ctx, ChangeQuery{Source: src}, func(c ChangeRecord) error {
				if !c.Recorded.After(prev) {
					t.Errorf("%s: change %d stamped %v, not after %v", src, n, c.Recorded, prev)
				}
				prev, n = c.Recorded, n+1
				return nil
			}); err != nil {
				return err
			}
			if n != want {
				t.Errorf("%s: %d changes, want %d", src, n, want)
			}
		}
		return nil
	}))
}

// BenchmarkCommitSources measures 4 sources committing at once on
// PostgreSQL, 500 new resources a commit, each source its own lock, and
// the same with every commit under the one lock of the store (as before
// commits took their sources' locks), in one run; it reports each rate
// and their ratio.
func BenchmarkCommitSources(b *testing.B) {
	s, _ := openPostgresTemp(b)
	ctx := b.Context()
	run := mustRun(b, s)
	const sources, commits, batch = 4, 40, 500
	rate := func(tag string) float64 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range sources {
			wg.Go(func() {
				src := fmt.Sprintf("http://s%d.example/", w)
				for c := range commits {
					if err := s.Commit(ctx, sourceBatch(src, run, fmt.Sprintf("%s-%d", tag, c), batch)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return float64(sources*commits*batch) / time.Since(t0).Seconds()
	}
	perSource := s.dialect.sourceLock
	var own, one []float64
	round := 0
	for b.Loop() {
		s.dialect.sourceLock = ""
		one = append(one, rate(fmt.Sprint("one", round)))
		s.dialect.sourceLock = perSource
		own = append(own, rate(fmt.Sprint("own", round)))
		round++
	}
	var sOwn, sOne float64
	for i := range own {
		sOwn, sOne = sOwn+own[i], sOne+one[i]
	}
	b.ReportMetric(sOwn/float64(len(own)), "resources/s-own-locks")
	b.ReportMetric(sOne/float64(len(one)), "resources/s-one-lock")
	b.ReportMetric(sOwn/sOne, "ratio")
}
