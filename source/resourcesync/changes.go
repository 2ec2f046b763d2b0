package resourcesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state/changeplan"
)

// planChanges plans an incremental task from the change packages and
// Change Lists its walk met in range (w.pending): it reads every change in
// range of each into a scratch plan, Concurrency at a time, decides each
// resource's winner (its latest change, whatever order the packages were
// read in), and emits, in an order that depends on the source alone: the
// failures met reading, the winning deletes as records, then, last
// package first (the likeliest still on the executor's spool), a Change
// List's winning creates and updates as records to GET and a package
// holding winners as a package with its Wins. With no Until, each set's
// checkpoint moves to the newest change read.
func (w *walk) planChanges(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	dir := w.ScratchDir
	if dir == "" {
		dir = os.TempDir()
	}
	p, err := changeplan.New(ctx, dir)
	if err != nil {
		return err
	}
	defer p.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(w.Concurrency, 1))
	for i := range w.pending {
		g.Go(func() error { return w.readChanges(gctx, p, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := p.Decide(ctx); err != nil {
		return err
	}
	if err := p.Failures(ctx, func(f source.Failure) error { return w.fail(ctx, f) }); err != nil {
		return err
	}
	if err := p.Deletes(ctx, func(c changeplan.Planned) error { return w.emit(ctx, source.Unit{Record: c.Rec}) }); err != nil {
		return err
	}
	if err := w.retry(ctx, func(uri string) (bool, error) { return p.Has(ctx, uri) }); err != nil {
		return err
	}
	pkgs, err := p.PutPackages(ctx)
	if err != nil {
		return err
	}
	changes, winners, err := p.Counts(ctx)
	if err != nil {
		return err
	}
	w.Log.Info("plan", "packages_in_range", len(w.pending), "changes", changes, "winners", winners, "packages_with_puts", len(pkgs))
	for _, i := range pkgs {
		j := w.pending[i]
		if j.List {
			err = p.PutsIn(ctx, i, func(c changeplan.Planned) error { return w.emit(ctx, source.Unit{Record: c.Rec}) })
		} else {
			err = p.PutsIn(ctx, i, func(c changeplan.Planned) error {
				j.Wins = append(j.Wins, *c.Rec)
				return nil
			})
			if err == nil {
				err = w.emit(ctx, source.Unit{Package: &j})
			}
		}
		if err != nil {
			return err
		}
	}
	if !w.task.Until.IsZero() {
		return nil
	}
	newest, err := p.Newest(ctx)
	if err != nil {
		return err
	}
	for i, t := range newest {
		if cp := w.sets[w.pending[i].ResourceSet]; cp != nil && t.After(cp.Next) {
			cp.Next = t
		}
	}
	return nil
}

// readChanges reads the changes in range of package w.pending[i] into p:
// from its manifest copy (rel="contents"; a Change List is its own), else
// from the manifest inside the package, which OpenPackage opens. A
// package that cannot be read, and each malformed entry, are recorded as
// failures in p; only a fatal error or the end of ctx is returned.
func (w *walk) readChanges(ctx context.Context, p *changeplan.Plan, i int) (err error) {
	j := &w.pending[i]
	cp := w.sets[j.ResourceSet]
	gap := w.gaps[i] // zero, or where the capability preferred covers
	pkgFail := func(stage string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errclass.IsFatal(err) {
			return err
		}
		var se *source.StageError
		if errors.As(err, &se) {
			stage = se.Stage
		}
		return p.Fail(ctx, i, -1, source.Failure{URI: j.URL, ResourceSet: j.ResourceSet, Listed: j.URL, Stage: stage, Err: err, Package: true, At: j.From})
	}
	var rd *manifest.Reader
	var closeRd func()
	if j.Contents != "" {
		rd, closeRd, err = w.openDocument(ctx, j.Contents)
	} else if w.OpenPackage == nil {
		return errclass.Fatalf("resourcesync: %s has no manifest copy, and the planner cannot open packages", j.URL)
	} else {
		rd, closeRd, err = w.openPackage(ctx, *j)
	}
	if err != nil {
		return pkgFail("manifest", err)
	}
	defer closeRd()
	wantCap := manifest.ChangeDumpManifest
	if j.List {
		wantCap = manifest.ChangeList
	}
	if c := rd.Header().Metadata.Capability; c != wantCap {
		return pkgFail("manifest", errclass.Permanentf("%s: capability %q, expected %q", orNone(j.Contents, j.URL), c, wantCap))
	}
	const batch = 1000
	var recs []*source.Record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		err := p.Add(ctx, j, i, recs)
		recs = recs[:0]
		return err
	}
	// entryFail records an entry's own failure; the resource it names
	// (retry, when it can be fetched) is asked for again by the next task.
	entryFail := func(seq int64, uri string, err error, retry *source.Record) error {
		f := source.Failure{URI: uri, ResourceSet: j.ResourceSet, Listed: j.URL, Document: j.Contents, Stage: "manifest", Err: errclass.NewPermanent(err), Resource: true, Retry: retry}
		return p.Fail(ctx, i, seq, f)
	}
	for seq := int64(0); ; seq++ {
		e, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			var ee *manifest.EntryError
			if errors.As(err, &ee) {
				if t := ee.Time; !t.IsZero() && (t.Before(cp.From) || t.After(cp.Until) || !gap.IsZero() && !t.Before(gap)) {
					continue // as below: not a change this document is read for
				}
				// At its own time when it was read; else at most the
				// package's end (now for an open one): what it says wins
				// over the older changes held, and a later package's
				// change of the resource wins over it.
				retry := entryRetry(ee.Loc, ee.Change, j.ResourceSet, j.URL, cmp.Or(ee.Time, j.Until, w.now))
				if err := entryFail(seq, orNone(ee.Loc, j.URL), err, retry); err != nil {
					return err
				}
				continue
			}
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return pkgFail("manifest", fmt.Errorf("manifest: %w", err))
		}
		if t := e.ChangeTime(); !t.IsZero() && (t.Before(cp.From) || t.After(cp.Until) || !gap.IsZero() && !t.Before(gap)) {
			continue // not a change this document is read for, whatever is wrong with it
		}
		if err := checkChange(e, !j.List); err != nil {
			// At its own time when it gives one.
			retry := entryRetry(e.Loc, e.Metadata.Change, j.ResourceSet, j.URL, cmp.Or(e.ChangeTime(), j.Until, w.now))
			if err := entryFail(seq, e.Loc, err, retry); err != nil {
				return err
			}
			continue
		}
		rec := recordOf(e, j.ResourceSet, j.URL, j.At, w.ViaIdentity)
		rec.Seq = seq
		recs = append(recs, rec)
		if len(recs) >= batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// checkChange validates a change entry: a known change type, a datetime,
// and a path for what must be read from a package.
func checkChange(e *manifest.Entry, needPath bool) error {
	c := e.Metadata.Change
	switch c {
	case manifest.Created, manifest.Updated, manifest.Deleted:
	case "":
		return errclass.Permanentf("change entry without a change type")
	default:
		return errclass.Permanentf("unknown change type %q", c)
	}
	if e.ChangeTime().IsZero() {
		return errclass.Permanentf("%s change without a datetime or lastmod", c)
	}
	if needPath && c != manifest.Deleted && e.Metadata.Path == "" {
		return errclass.Permanentf("%s change without a path in the package", c)
	}
	return nil
}
