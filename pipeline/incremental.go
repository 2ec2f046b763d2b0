package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/state"
)

// Range is the interval of an incremental run, inclusive at both ends. A
// zero From means "from the checkpoint of each resource set"; a zero Until
// means "up to now".
type Range struct {
	From, Until time.Time
}

// ErrNoCheckpoint is wrapped by Incremental's error when no --from was
// given and the state holds no checkpoint for the source: run a baseline
// first.
var ErrNoCheckpoint = source.ErrNoCheckpoint

// setRange is the range of one resource set, as planned, and the newest
// change seen in it.
type setRange struct {
	source.Checkpoint
	newest time.Time
}

// Incremental applies, from the source's Change Dump(s), the latest change
// in rng of every resource: created and updated resources are written,
// deleted ones removed from every sink. Packages whose interval does not
// meet the range are never requested; when the Change Dump links each
// package's manifest (rel="contents"), only packages holding a winning
// change are downloaded. The outcome does not depend on the order in which
// packages are read. Checkpoints advance as seed 003 says: to the range's
// end (or the newest change seen, for an open dump), held back at the
// earliest temporary failure.
func Incremental(ctx context.Context, opts Options, rng Range) (*Report, error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if !rng.From.IsZero() && !rng.Until.IsZero() && rng.From.After(rng.Until) {
		return nil, errclass.Fatalf("--from %s is later than --until %s", manifest.FormatDatetime(rng.From), manifest.FormatDatetime(rng.Until))
	}
	r := newRun(opts)
	rep := &Report{Mode: "incremental", Source: opts.Source, Started: time.Now().UTC()}
	if err := r.begin(ctx, rep); err != nil {
		return nil, err
	}
	inc := &incremental{run: r, rng: rng, sets: map[string]*setRange{}, spooled: map[string]*spooled{}, pkgSet: map[string]string{},
		spoolSlots: make(chan struct{}, opts.Concurrency+1)}
	r.onFinish = inc.setCheckpoints
	runErr := inc.execute(ctx)
	if !rng.From.IsZero() {
		f := rng.From
		rep.From = &f
	}
	if !rng.Until.IsZero() {
		u := rng.Until
		rep.Until = &u
	}
	return r.finish(ctx, rep, runErr)
}

type incremental struct {
	*run
	rng  Range
	mu   sync.Mutex
	sets map[string]*setRange
	// spooled keeps packages downloaded to read their manifest (no
	// rel="contents" copy) for the apply phase — only the last ones
	// planned (see keepSpooled); the others are read again when applied.
	spooled map[string]*spooled
	pkgSet  map[string]string // package URL → resource set
	plan    *state.Plan
	// spoolSlots bounds the packages on the spool disk at once, in both
	// phases, to Concurrency+1: a package holds a slot from before its
	// download until its spool file is removed. The disk an incremental
	// run needs does not grow with the range.
	spoolSlots chan struct{}
	// unplanned counts the packages whose planning has not started.
	unplanned atomic.Int64
}

// spoolSlot waits for a slot on the spool disk (see spoolSlots) and
// returns its release.
func (inc *incremental) spoolSlot(ctx context.Context) (func(), error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case inc.spoolSlots <- struct{}{}:
	}
	var once sync.Once
	return func() { once.Do(func() { <-inc.spoolSlots }) }, nil
}

// rangeOf returns the range the plan resolved for resource set.
func (inc *incremental) rangeOf(set string) (*setRange, error) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if sr, ok := inc.sets[set]; ok {
		return sr, nil
	}
	return nil, errclass.Fatalf("incremental: no range planned for resource set %q", set)
}

// rangeRereadMin is the least declared length of a package that an
// incremental run reads again by Range rather than downloading it again:
// below it, Range's read-ahead blocks (fetch.RangeBlock, doubling) cost
// about as much as the whole package.
const rangeRereadMin = 16 * fetch.RangeBlock

// keepSpooled keeps sp (with its spool slot) for the apply phase when no
// package is left to plan — the last packages planned are read once — and
// reports whether it did. Earlier packages are removed after planning and
// read again when applied, so the spool never holds more than
// Concurrency+1 packages, however long the range.
func (inc *incremental) keepSpooled(url string, sp *spooled, release func()) bool {
	if inc.unplanned.Load() > 0 {
		return false
	}
	prev := sp.release
	sp.release = func() {
		if prev != nil {
			prev()
		}
		release()
	}
	inc.mu.Lock()
	inc.spooled[url] = sp
	inc.mu.Unlock()
	return true
}

func (inc *incremental) execute(ctx context.Context) error {
	// The commit stage runs across every phase: failures are recorded
	// from discovery on.
	inc.results = make(chan result, 256)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return inc.commit(gctx) })
	g.Go(func() error {
		defer close(inc.results)
		return inc.phases(gctx)
	})
	return g.Wait()
}

// phases runs discovery, planning and application in turn.
func (inc *incremental) phases(ctx context.Context) error {
	plan, err := state.NewPlan(ctx, inc.opts.SpoolDir)
	if err != nil {
		return err
	}
	inc.plan = plan
	defer plan.Close()
	defer func() {
		for _, sp := range inc.spooled {
			sp.Close()
		}
	}()

	// 1. Discover the change packages that meet the range.
	var pkgs []source.Package
	cps, err := inc.planTask(ctx, inc.task(source.Incremental, inc.rng), func(ctx context.Context, u source.Unit) error {
		if u.Package == nil {
			return errclass.Fatalf("incremental: the planner emitted a record; only packages are applied")
		}
		inc.counts.notePackage(u.Package.Expect.Length)
		pkgs = append(pkgs, *u.Package)
		inc.pkgSet[u.Package.URL] = u.Package.ResourceSet
		return nil
	})
	if err != nil {
		return err
	}
	for _, cp := range cps {
		inc.sets[cp.ResourceSet] = &setRange{Checkpoint: cp}
	}

	// 2. Plan: read every in-range change into the plan.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(inc.opts.Concurrency)
	inc.unplanned.Store(int64(len(pkgs)))
	for i := range pkgs {
		j := pkgs[i]
		g.Go(func() error { return inc.planPackage(gctx, j) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := plan.Decide(ctx); err != nil {
		return err
	}
	if err := inc.markHeld(ctx); err != nil {
		return err
	}
	winners, err := plan.WinnerPackages(ctx)
	if err != nil {
		return err
	}
	// Packages kept spooled with nothing left to apply give their slots
	// back now.
	isWinner := make(map[string]bool, len(winners))
	for _, u := range winners {
		isWinner[u] = true
	}
	for u, sp := range inc.spooled {
		if !isWinner[u] {
			sp.Close()
			delete(inc.spooled, u)
		}
	}
	// Packages with nothing left to apply are done already.
	if n := int64(len(pkgs)-len(winners)) - inc.counts.PackagesFailed.Load(); n > 0 {
		inc.counts.PackagesDone.Add(n)
	}
	changes, won, _ := plan.Counts(ctx)
	inc.log.Info("plan", "packages_in_range", len(pkgs), "changes", changes, "winners", won, "packages_to_fetch", len(winners))

	// 3. Apply: deletes need no package; puts stream the winning packages.
	r := inc.run
	g, gctx = errgroup.WithContext(ctx)
	entries := make(chan entryJob, 4*inc.opts.Workers)
	listEntries := make(chan entryJob, inc.listConcurrency())
	byURL := map[string]source.Package{}
	for _, j := range pkgs {
		byURL[j.URL] = j
	}
	var producers sync.WaitGroup
	producers.Add(1)
	g.Go(func() error {
		defer producers.Done()
		return inc.applyDeletes(gctx)
	})
	// Packages still spooled from planning go first: their slots free up
	// for the packages that are read again.
	slices.SortStableFunc(winners, func(a, b string) int {
		_, ka := inc.spooled[a]
		_, kb := inc.spooled[b]
		switch {
		case ka && !kb:
			return -1
		case kb && !ka:
			return 1
		}
		return 0
	})
	pkgCh := make(chan source.Package)
	g.Go(func() error {
		defer close(pkgCh)
		for _, u := range winners {
			select {
			case <-gctx.Done():
				return gctx.Err()
			case pkgCh <- byURL[u]:
			}
		}
		return nil
	})
	for range inc.packageWorkers() {
		producers.Add(1)
		g.Go(func() error {
			defer producers.Done()
			for {
				select {
				case <-gctx.Done():
					return gctx.Err()
				case j, ok := <-pkgCh:
					if !ok {
						return nil
					}
					out := entries
					if j.List {
						out = listEntries
					}
					if err := inc.applyPackage(gctx, j, out); err != nil {
						return err
					}
				}
			}
		})
	}
	g.Go(func() error {
		producers.Wait()
		close(entries)
		close(listEntries)
		return nil
	})
	var workers sync.WaitGroup
	r.startWorkers(gctx, g, &workers, inc.deliveryWorkers(), entries)
	r.startWorkers(gctx, g, &workers, inc.listConcurrency(), listEntries)
	return g.Wait()
}

// planPackage reads one package's manifest — its rel="contents" copy when
// the Change Dump links one, else the manifest inside the downloaded
// package — into the plan. A downloaded package stays spooled for the
// apply phase only when no package is left to plan after it (see
// keepSpooled); otherwise its spool file is removed at once.
func (inc *incremental) planPackage(ctx context.Context, j source.Package) (err error) {
	inc.unplanned.Add(-1)
	sr, err := inc.rangeOf(j.ResourceSet)
	if err != nil {
		return err
	}
	hold := j.From
	if hold.IsZero() || hold.Before(sr.From) {
		hold = sr.From
	}
	pkgFail := func(stage string, err error) error { return inc.packageFailed(ctx, j, hold, stage, err) }
	var rd *manifest.Reader
	if j.Contents != "" {
		doc, closeDoc, err := inc.openDocument(ctx, j.Contents)
		if err != nil {
			return pkgFail("manifest", err)
		}
		defer closeDoc()
		rd = doc
	} else {
		release, err := inc.spoolSlot(ctx)
		if err != nil {
			return err
		}
		sp, err := inc.fetchPackage(ctx, j)
		if err != nil {
			release()
			return pkgFail(sp.stage, err)
		}
		kept := false
		defer func() {
			if !kept {
				sp.Close()
				release()
			}
		}()
		defer func() {
			if err == nil {
				kept = inc.keepSpooled(j.URL, sp, release)
			}
		}()
		mrc, err := sp.arch.Manifest()
		if err != nil {
			return pkgFail("manifest", err)
		}
		defer mrc.Close()
		if rd, err = manifest.NewReader(mrc, inc.opts.Document); err != nil {
			return pkgFail("manifest", fmt.Errorf("manifest.xml: %w", err))
		}
	}
	wantCap := manifest.ChangeDumpManifest
	if j.List {
		wantCap = manifest.ChangeList
	}
	if c := rd.Header().Metadata.Capability; c != wantCap {
		return pkgFail("manifest", errclass.Permanentf("%s: capability %q, expected %q", j.Contents, c, wantCap))
	}
	const batch = 1000
	var cs []state.PlannedChange
	flush := func() error {
		if len(cs) == 0 {
			return nil
		}
		err := inc.plan.Add(ctx, cs)
		cs = cs[:0]
		return err
	}
	for seq := int64(0); ; seq++ {
		e, err := rd.Next()
		if err != nil {
			if isEOF(err) {
				break
			}
			var ee *manifest.EntryError
			if asEntryError(err, &ee) {
				inc.counts.Failed.Add(1)
				inc.fail(ctx, Failure{URI: orDefault(ee.Loc, j.URL), Package: j.URL, Stage: "manifest", Error: err.Error(), Permanent: true}, time.Time{})
				continue
			}
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return pkgFail("manifest", fmt.Errorf("manifest: %w", err))
		}
		c, err := checkChange(e, !j.List)
		if err != nil {
			inc.counts.Failed.Add(1)
			inc.fail(ctx, Failure{URI: e.Loc, Package: j.URL, Stage: "manifest", Error: err.Error(), Permanent: true}, time.Time{})
			continue
		}
		t := e.ChangeTime()
		if t.Before(sr.From) || t.After(sr.Until) {
			continue
		}
		inc.mu.Lock()
		if t.After(sr.newest) {
			sr.newest = t
		}
		inc.mu.Unlock()
		md := e.Metadata
		cs = append(cs, state.PlannedChange{URI: e.Loc, Time: t, Change: string(c), Package: j.URL, PackageFrom: j.From, Seq: seq,
			Path: md.Path, Hashes: md.Hashes, Length: md.Length, Type: md.Type, Lastmod: e.Lastmod})
		if len(cs) >= batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// markHeld leaves out of the download the winning changes whose exact
// version (length and hashes, as the manifest gives them) the destination
// already holds, or that a newer applied change supersedes: a repeated
// catch-up downloads nothing.
func (inc *incremental) markHeld(ctx context.Context) error {
	var held []string
	flush := func() error {
		err := inc.plan.MarkHeld(ctx, held)
		held = held[:0]
		return err
	}
	err := inc.plan.Puts(ctx, func(c state.PlannedChange) error {
		prev, had, err := inc.opts.Store.Resource(ctx, inc.opts.SourceKey, c.URI)
		if err != nil || !had {
			return err
		}
		superseded := !prev.ChangeTime.IsZero() && prev.ChangeTime.After(c.Time)
		if !superseded && !holds(prev, fixity.Expect{Length: c.Length, Hashes: c.Hashes}) {
			return nil
		}
		if len(inc.sinks) > 1 {
			// Partial deliveries are settled per entry by deliver.
			if ds, err := inc.opts.Store.Deliveries(ctx, inc.opts.SourceKey, c.URI); err != nil || len(ds) > 0 {
				return err
			}
		}
		inc.counts.Unchanged.Add(1)
		held = append(held, c.URI)
		if !superseded {
			// Record the change's time, so that an older change read by
			// a later run can never overwrite this version.
			rec := prev
			rec.ChangeTime, rec.Outcome, rec.RunID, rec.Updated = c.Time, state.OutcomeUnchanged, inc.runID, time.Time{}
			if err := inc.send(ctx, result{outcome: outUnchanged, resource: rec, hadRecord: true}); err != nil {
				return err
			}
		}
		if len(held) >= 1000 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// checkChange validates a change entry: a known change type, a datetime,
// and a path for what must be read from the package.
func checkChange(e *manifest.Entry, needPath bool) (manifest.Change, error) {
	c := e.Metadata.Change
	switch c {
	case manifest.Created, manifest.Updated, manifest.Deleted:
	case "":
		return "", errclass.Permanentf("change entry without a change type")
	default:
		return "", errclass.Permanentf("unknown change type %q", c)
	}
	if e.ChangeTime().IsZero() {
		return "", errclass.Permanentf("%s change without a datetime or lastmod", c)
	}
	if needPath && c != manifest.Deleted && e.Metadata.Path == "" {
		return "", errclass.Permanentf("%s change without a path in the package", c)
	}
	return c, nil
}

// applyDeletes removes every resource whose winning change is a delete.
func (inc *incremental) applyDeletes(ctx context.Context) error {
	return inc.plan.Deletes(ctx, func(c state.PlannedChange) error {
		res := inc.deleteResource(ctx, c)
		if res.fatal != nil {
			return res.fatal
		}
		return inc.send(ctx, res)
	})
}

func (inc *incremental) deleteResource(ctx context.Context, c state.PlannedChange) result {
	set := ""
	if j, ok := inc.packageSet(c.Package); ok {
		set = j
	}
	prev, had, err := inc.opts.Store.Resource(ctx, inc.opts.SourceKey, c.URI)
	if err != nil {
		return result{fatal: err}
	}
	if had && !prev.ChangeTime.IsZero() && (prev.ChangeTime.After(c.Time) || (prev.Deleted && prev.ChangeTime.Equal(c.Time))) {
		// A newer change is applied, or this very delete already was.
		inc.counts.Unchanged.Add(1)
		return result{outcome: outSuperseded}
	}
	rec := state.Resource{URI: c.URI, Source: inc.opts.SourceKey, ResourceSet: set, Length: -1, ChangeTime: c.Time,
		Package: c.Package, RunID: inc.runID, Outcome: state.OutcomeDeleted, Deleted: true}
	for _, s := range inc.sinks {
		if err := inc.deleteFrom(ctx, s, c.URI); err != nil {
			if errclass.IsFatal(err) {
				return result{fatal: err}
			}
			inc.counts.Failed.Add(1)
			f := Failure{URI: c.URI, Package: c.Package, Stage: "deliver", Error: err.Error(), Permanent: errclass.IsPermanent(err)}
			inc.rec.fail(f)
			if !f.Permanent {
				inc.noteHold(set, c.Time)
			}
			return result{outcome: outFailed, hadRecord: true, failure: &f, changeTime: c.Time}
		}
	}
	inc.counts.Deleted.Add(1)
	return result{outcome: outDeleted, resource: rec, change: string(manifest.Deleted)}
}

// deleteFrom deletes uri from one sink within its concurrency, retrying a
// temporary failure as puts are retried (see sinkRetrying).
func (r *run) deleteFrom(ctx context.Context, s boundSink, uri string) error {
	return r.sinkRetrying(ctx, s, uri, func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s.sem <- struct{}{}:
		}
		defer func() { <-s.sem }()
		if err := s.Delete(ctx, uri); err != nil {
			if errclass.Of(err) == errclass.Unclassified {
				err = errclass.NewRetryable(err)
			}
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	}, nil)
}

var _ sink.Sink = boundSink{}

// packageSet returns the resource set of a package of this run.
func (inc *incremental) packageSet(pkgURL string) (string, bool) {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	set, ok := inc.pkgSet[pkgURL]
	return set, ok
}

// applyPackage streams one package holding winning changes: the package's
// own manifest.xml is authoritative for paths and hashes; each of its
// entries that is the winner of its resource goes to the workers.
func (inc *incremental) applyPackage(ctx context.Context, j source.Package, out chan<- entryJob) error {
	if j.List {
		return inc.applyList(ctx, j, out)
	}
	inc.mu.Lock()
	sp := inc.spooled[j.URL]
	delete(inc.spooled, j.URL)
	inc.mu.Unlock()
	if sp != nil {
		defer sp.Close() // and its spool slot
	}
	sr, err := inc.rangeOf(j.ResourceSet)
	if err != nil {
		return err
	}
	hold := j.From
	if hold.IsZero() || hold.Before(sr.From) {
		hold = sr.From
	}
	pkgFail := func(stage string, err error) error { return inc.packageFailed(ctx, j, hold, stage, err) }
	if sp == nil && j.Contents == "" && !inc.opts.DisableRangeResync && j.Expect.Length >= rangeRereadMin {
		// Downloaded once already, to plan: read only the winners by
		// Range where the server allows it.
		ranged, ok, err := inc.readByRange(ctx, j)
		if err != nil {
			return pkgFail(ranged.stage, err)
		}
		if ok {
			sp = ranged
			defer sp.Close()
		}
	}
	if sp == nil {
		release, err := inc.spoolSlot(ctx)
		if err != nil {
			return err
		}
		if sp, err = inc.fetchPackage(ctx, j); err != nil {
			release()
			return pkgFail(sp.stage, err)
		}
		defer release()
		defer sp.Close()
	}
	// The winners of this package, by URI, to match against its manifest.
	want := map[string]state.PlannedChange{}
	if err := inc.plan.WinnersIn(ctx, j.URL, func(c state.PlannedChange) error {
		want[c.URI] = c
		return nil
	}); err != nil {
		return err
	}
	mrc, err := sp.arch.Manifest()
	if err != nil {
		return pkgFail("manifest", err)
	}
	defer mrc.Close()
	rd, err := manifest.NewReader(mrc, inc.opts.Document)
	if err != nil {
		return pkgFail("manifest", fmt.Errorf("manifest.xml: %w", err))
	}
	var wg sync.WaitGroup
	for seq := int64(0); ; seq++ {
		e, err := rd.Next()
		if err != nil {
			if isEOF(err) {
				break
			}
			var ee *manifest.EntryError
			if asEntryError(err, &ee) {
				continue // recorded when the plan was made
			}
			if perr := pkgFail("manifest", fmt.Errorf("manifest.xml: %w", err)); perr != nil {
				return perr
			}
			break
		}
		w, ok := want[e.Loc]
		// A manifest copy is the same document as the manifest.xml, so
		// the position identifies the winning entry even among several
		// changes of one resource in the same second.
		if !ok || !e.ChangeTime().Equal(w.Time) || string(e.Metadata.Change) != w.Change || seq != w.Seq {
			continue
		}
		delete(want, e.Loc) // one entry per winner, even if repeated at the same time
		wg.Add(1)
		select {
		case <-ctx.Done():
			wg.Done()
			return ctx.Err()
		case out <- entryJob{pkg: &j, rec: resourcesync.RecordOf(e, j.ResourceSet, j.URL, j.At), arch: sp.arch, done: wg.Done}:
		}
	}
	for uri, w := range want {
		inc.counts.Failed.Add(1)
		inc.fail(ctx, Failure{URI: uri, Package: j.URL, Stage: "manifest",
			Error: fmt.Sprintf("the change of %s listed in the manifest copy is not in the package's manifest.xml", manifest.FormatDatetime(w.Time)), Permanent: true}, w.Time)
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-allDone:
	}
	inc.counts.PackagesDone.Add(1)
	return nil
}

// applyList hands a Change List's winning created/updated changes to the
// workers, which GET each resource.
func (inc *incremental) applyList(ctx context.Context, j source.Package, out chan<- entryJob) error {
	var wg sync.WaitGroup
	err := inc.plan.WinnersIn(ctx, j.URL, func(c state.PlannedChange) error {
		rec := &source.Record{URI: c.URI, ResourceSet: j.ResourceSet, Listed: j.URL, Change: source.Change(c.Change), ChangeTime: c.Time,
			Length: c.Length, Hashes: c.Hashes, Type: c.Type, Lastmod: c.Lastmod}
		wg.Add(1)
		select {
		case <-ctx.Done():
			wg.Done()
			return ctx.Err()
		case out <- entryJob{pkg: &j, rec: rec, done: wg.Done}:
			return nil
		}
	})
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-allDone:
	}
	if err != nil {
		return err
	}
	inc.counts.PackagesDone.Add(1)
	return nil
}

// setCheckpoints advances each resource set's checkpoint: to the range's
// end when --until was given, else to the newest change seen (or where the
// run started, when nothing was seen), held at the earliest temporary
// failure.
func (inc *incremental) setCheckpoints(ctx context.Context, rep *Report) error {
	now := time.Now().UTC()
	for set, sr := range inc.sets {
		next := sr.Next
		if inc.rng.Until.IsZero() && sr.newest.After(next) {
			next = sr.newest
		}
		if hold, ok := inc.holdOf(set); ok && hold.Before(next) {
			next = hold
			if next.Before(sr.From) {
				next = sr.From // never before where this run started
			}
		}
		cp := state.Checkpoint{Source: inc.opts.SourceKey, CapabilityList: set, Next: next, Baseline: sr.Baseline, Open: sr.Open, RunID: inc.runID, Updated: now}
		if err := inc.opts.Store.SetCheckpoint(ctx, cp); err != nil {
			return err
		}
	}
	return nil
}
