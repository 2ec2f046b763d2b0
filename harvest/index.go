package harvest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
)

// maxIndexMissing caps the URIs an IndexReport names.
const maxIndexMissing = 100

// IndexReport is what Index did.
type IndexReport struct {
	// Held is how many resources the state holds of the job's source;
	// Written how many were written to every target that takes them (a
	// target holding a version of its own, another than the record's, is
	// not given the record's: a resource every target holds so is counted
	// in neither Written nor Missing).
	Held, Written int64
	// Missing counts the resources no sink of the job holds a matching
	// copy of, and names the first of them.
	Missing    int64
	MissingURI []string
}

// Index writes into the sinks targets (specs) every resource the state
// holds of j's source, each read from the copy one of j's other sinks keeps
// (a sink.Inventory: fs, s3, es with its bodies) and verified against the
// length and strongest digest the state records, with no request to the
// source: harvesting and indexing kept independent. It rebuilds
// a search index that was dropped, and fills a sink added to a site later.
// A resource no sink holds a matching copy of is counted missing (the next
// harvest, or an audit with repair, fetches it); the targets are written in
// the state's order of URIs. An error of a target ends the run. It holds
// the source's lease as Run does.
func (h *Harvester) Index(ctx context.Context, j Job, targets []string) (IndexReport, error) {
	var rep IndexReport
	if len(targets) == 0 {
		return rep, &InvalidError{errors.New("index: no sink to write to")}
	}
	j.prepare()
	j, _, _, release, err := h.leaseSource(ctx, j, h.LeaseWait)
	if err != nil {
		return rep, err
	}
	defer release()
	return h.index(ctx, j, targets)
}

// index is Index under the source's leases, its key found.
func (h *Harvester) index(ctx context.Context, j Job, targets []string) (IndexReport, error) {
	var rep IndexReport
	var from []string
	for _, s := range j.Sinks {
		if !slices.Contains(targets, s) {
			from = append(from, s)
		}
	}
	srcs, closeSrcs, err := OpenSinks(ctx, h.Sinks, from)
	if err != nil {
		return rep, &InvalidError{err}
	}
	defer closeSrcs(ctx)
	var copies []sink.Inventory
	for _, s := range srcs {
		if inv, ok := s.(sink.Inventory); ok {
			copies = append(copies, inv)
		}
	}
	if len(copies) == 0 {
		return rep, &InvalidError{fmt.Errorf("index: no other sink of the job keeps bodies (fs, s3, or es with store_body) to read the copies from")}
	}
	tgts, closeTgts, err := OpenSinks(ctx, h.Sinks, targets)
	if err != nil {
		return rep, &InvalidError{err}
	}
	names := RedactSpecs(targets)
	err = h.Store.WalkResources(ctx, j.Key(), func(r state.Resource) error {
		if r.Deleted || (r.Outcome != state.OutcomeWritten && r.Outcome != state.OutcomeUnchanged) {
			return nil
		}
		rep.Held++
		// A target with a delivery of its own took another version than
		// the record's (a newer one the others failed), or deleted it:
		// the record's version is not its to be given.
		ds, err := h.Store.Deliveries(ctx, j.Key(), r.URI)
		if err != nil {
			return err
		}
		to := tgts
		if len(ds) > 0 {
			to = nil
			for i, t := range tgts {
				if !slices.ContainsFunc(ds, func(d state.Delivery) bool { return d.Sink == names[i] }) {
					to = append(to, t)
				}
			}
		}
		if len(to) == 0 {
			return nil // every target holds a version of its own
		}
		ok, err := indexOne(ctx, copies, to, &r)
		if err != nil {
			return err
		}
		if ok {
			rep.Written++
			return nil
		}
		rep.Missing++
		if len(rep.MissingURI) < maxIndexMissing {
			rep.MissingURI = append(rep.MissingURI, r.URI)
		}
		return nil
	})
	for _, t := range tgts {
		if b, ok := t.(sink.Batcher); ok && err == nil {
			if failed := b.Flush(ctx); len(failed) > 0 {
				err = fmt.Errorf("index: %d writes failed, the first %s: %w", len(failed), failed[0].URI, failed[0].Err)
			}
		}
	}
	return rep, errors.Join(err, closeTgts(ctx))
}

// indexOne writes r into every target from the first copy that matches
// what the state records; false when no copy does.
func indexOne(ctx context.Context, copies []sink.Inventory, tgts []sink.Sink, r *state.Resource) (bool, error) {
	res := &sink.Resource{URI: r.URI, Length: r.Length, Hashes: r.Hashes, Type: r.Type, Lastmod: r.Lastmod, ResourceSet: r.ResourceSet}
	for _, l := range r.Links {
		res.Links = append(res.Links, sink.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
	}
	want := fixity.Expect{Length: r.Length, Hashes: r.Hashes.Strongest()}
	for _, t := range tgts {
		done := false
		for _, c := range copies {
			rc, err := c.Get(ctx, r.URI)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errors.ErrUnsupported) {
				continue // not held there, or a sink that keeps no bodies
			}
			if err != nil {
				return false, fmt.Errorf("index: reading the copy of %s: %w", r.URI, err)
			}
			vr := fixity.NewReader(rc, want, fixity.Compute{})
			err = t.Put(ctx, res, vr)
			rc.Close()
			if err == nil && vr.Verified() {
				done = true
				break
			}
			if err != nil && !errors.Is(err, fixity.ErrMismatch) {
				return false, fmt.Errorf("index: writing %s: %w", r.URI, err)
			}
			if err == nil {
				return false, errclass.Fatalf("index: a sink returned before reading the whole body of %s", r.URI)
			}
		}
		if !done {
			return false, nil
		}
	}
	return true, nil
}
