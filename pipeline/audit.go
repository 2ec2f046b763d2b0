package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/state"
)

// SinkAudit is what an audit found in one sink.
type SinkAudit struct {
	Sink       string   `json:"sink"`
	Held       int64    `json:"held"`
	Missing    int64    `json:"missing"`
	Extra      int64    `json:"extra"`
	Mismatched int64    `json:"mismatched"`
	MissingURI []string `json:"missing_uris"`
	ExtraURI   []string `json:"extra_uris"`
	Mismatch   []string `json:"mismatched_uris"`
	// Newer counts the resources whose state is newer than the source's
	// snapshot (its Resource Dump's or Resource List's at): updated,
	// created or deleted by a change applied after it. They are neither
	// missing, extra nor mismatched, and a repair leaves them as they are.
	Newer    int64    `json:"newer"`
	NewerURI []string `json:"newer_uris,omitempty"`
	// Others counts what the sink holds that the state records of other
	// sources (harvested into the same sink): neither extra nor removed.
	Others int64 `json:"other_sources,omitempty"`
	// Unchecked counts the resources held whose body the sink does not
	// keep (an es index without store_body): present, not hashed.
	Unchecked int64 `json:"unchecked,omitempty"`
}

// AuditReport is the outcome of an audit: what the source lists against
// what each sink holds.
type AuditReport struct {
	Source   string      `json:"source"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished"`
	Listed   int64       `json:"listed"`
	Sinks    []SinkAudit `json:"sinks"`
	// Problems are documents or packages of the source that could not be
	// read (the audit is then incomplete).
	Problems []runreport.Failure `json:"problems,omitempty"`
	// Repair is the report of the repairing sync, with --repair.
	Repair  *runreport.Report `json:"repair,omitempty"`
	Removed int64             `json:"removed,omitempty"`
	// KeptExtra says a repair removed no extra resource because part of
	// the source's listing could not be read (Problems): what only that
	// part lists would have looked extra.
	KeptExtra bool `json:"kept_extra,omitempty"`
	// NotRepaired counts the missing or mismatched resources that the
	// state holds at a version newer than the snapshot: a repair from the
	// snapshot would roll them back, so it asks the next harvest for
	// them again instead (their state forgotten, each kept as a retry),
	// which fetches the source's current version. Until then the
	// differences remain.
	NotRepaired int64 `json:"not_repaired,omitempty"`
	// DryRun says the repair was only told to Options.Preview: nothing
	// was removed or fetched.
	DryRun bool `json:"dry_run,omitempty"`
}

// Clean reports whether the audit found nothing to mend.
func (a *AuditReport) Clean() bool {
	for _, s := range a.Sinks {
		if s.Missing+s.Extra+s.Mismatched > 0 {
			return false
		}
	}
	return len(a.Problems) == 0
}

// WriteJSON writes the audit as indented JSON.
func (a *AuditReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}

// WriteText writes the audit for people.
func (a *AuditReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "audit of %s: %d resources listed by the source\n", a.Source, a.Listed)
	for _, s := range a.Sinks {
		fmt.Fprintf(&b, "  %s: %d held, %d missing, %d extra, %d mismatched, %d newer than the snapshot", s.Sink, s.Held, s.Missing, s.Extra, s.Mismatched, s.Newer)
		if s.Others > 0 {
			fmt.Fprintf(&b, ", %d of other sources", s.Others)
		}
		if s.Unchecked > 0 {
			fmt.Fprintf(&b, ", %d not hashed (the sink keeps no body)", s.Unchecked)
		}
		b.WriteString("\n")
		for _, l := range []struct {
			what string
			uris []string
		}{{"missing", s.MissingURI}, {"extra", s.ExtraURI}, {"mismatched", s.Mismatch}, {"newer than the snapshot", s.NewerURI}} {
			for _, u := range l.uris {
				fmt.Fprintf(&b, "    %s: %s\n", l.what, runreport.Printable(u))
			}
		}
	}
	for _, p := range a.Problems {
		fmt.Fprintf(&b, "  problem: %s: %s\n", runreport.Printable(p.URI), runreport.Printable(p.Error))
	}
	if a.KeptExtra {
		fmt.Fprintf(&b, "repair: no extra resource removed: part of the source's listing could not be read\n")
	}
	if a.NotRepaired > 0 {
		what := "are asked for again by the next harvest (at the source's current version)"
		if a.Repair == nil && !a.DryRun {
			what = "a repair has the next harvest ask for again"
		}
		fmt.Fprintf(&b, "%d missing or mismatched resources held at a version newer than the snapshot: %s\n", a.NotRepaired, what)
	}
	switch {
	case a.DryRun:
		fmt.Fprintf(&b, "repair (dry run): would remove %d extra resources and fetch the missing and mismatched; nothing changed\n", a.Removed)
	case a.Repair != nil:
		fmt.Fprintf(&b, "repair: removed %d extra resources; then\n%s", a.Removed, a.Repair.Summary())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxAuditList caps the URIs an audit report lists per kind and sink.
const maxAuditList = 1000

// Audit compares what the destination holds with what the source lists
// now — what a baseline task of the source's protocol names: records, and
// the entries of packages' listings — and reports, per sink, the resources
// missing, extra, and mismatched (length or hashes differ; every held body
// is read and hashed). With repair, extra resources are removed from the
// sinks and the state, and missing or mismatched ones fetched again by a
// baseline run. Every sink must implement sink.Inventory.
//
// The source's listing is a snapshot (its Resource Dump's or Resource
// List's at), often older than the changes the destination applied since:
// a resource held at a version newer than the snapshot, or deleted after
// it, is counted newer than the snapshot, not as a difference, and a
// repair never replaces a held body with an older one nor recreates what
// was deleted later. With opts.DryRun, a repair tells Options.Preview what
// it would remove and fetch and changes nothing.
func Audit(ctx context.Context, opts Options, repair bool) (*AuditReport, error) {
	opts, cleanup, err := prepare(opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	r := newRun(opts)
	for _, s := range r.sinks {
		if _, ok := s.Sink.(sink.Inventory); !ok {
			return nil, errclass.Fatalf("sink %s cannot list what it holds, so it cannot be audited", s.name)
		}
	}
	ar := &AuditReport{Source: opts.Source, Started: time.Now().UTC()}
	inv, err := state.NewInventory(ctx, opts.SpoolDir)
	if err != nil {
		return nil, err
	}
	defer inv.Close()
	if ar.Problems, err = r.inventory(ctx, inv); err != nil {
		return nil, err
	}
	if ar.Listed, err = inv.Count(ctx); err != nil {
		return nil, err
	}
	newer := r.newerThanSnapshot(opts)
	others, err := r.heldByOthers(ctx)
	if err != nil {
		return nil, err
	}
	var forget, extras, unlisted []string
	// requeue are resources held at a version newer than the snapshot that
	// a sink lacks or holds damaged (see AuditReport.NotRepaired).
	var requeue []state.Resource
	requeued := map[string]bool{}
	ask := func(rec state.Resource) {
		if !requeued[rec.URI] {
			requeued[rec.URI] = true
			requeue = append(requeue, rec)
			ar.NotRepaired++
		}
	}
	extraIn := map[string][]boundSink{}
	mismatched := map[string]bool{}
	for _, s := range r.sinks {
		sa := SinkAudit{Sink: s.name}
		err := s.Sink.(sink.Inventory).Walk(ctx, func(uri string) error {
			sa.Held++
			l, ok, err := inv.Lookup(ctx, uri)
			if err != nil {
				return err
			}
			if !ok {
				rec, n, err := newer(ctx, uri)
				if err != nil {
					return err
				}
				if n && !rec.Deleted {
					sa.noteNewer(uri) // created after the snapshot
					return inv.MarkHeld(ctx, uri, s.name)
				}
				if theirs, err := others(ctx, uri); err != nil {
					return err
				} else if theirs {
					// Another source's, in the same sink: not this
					// audit's to count or remove.
					sa.Held--
					sa.Others++
					return inv.MarkHeld(ctx, uri, s.name) // held: no record of it is missing
				}
				sa.Extra++
				if len(sa.ExtraURI) < maxAuditList {
					sa.ExtraURI = append(sa.ExtraURI, uri)
				}
				if len(extraIn[uri]) == 0 {
					extras = append(extras, uri)
				}
				extraIn[uri] = append(extraIn[uri], s)
				return inv.MarkHeld(ctx, uri, s.name)
			}
			if err := verifyHeld(ctx, s.Sink.(sink.Inventory), uri, r.checked(fixity.Expect{Length: l.Length, Hashes: l.Hashes})); err != nil {
				if errors.Is(err, errors.ErrUnsupported) {
					sa.Unchecked++ // a sink that keeps no body: present
					return inv.MarkHeld(ctx, uri, s.name)
				}
				if !errors.Is(err, fixity.ErrMismatch) {
					return fmt.Errorf("audit: reading %s from %s: %w", uri, s.name, err)
				}
				rec, n, err := newer(ctx, uri)
				if err != nil {
					return err
				}
				if n && !rec.Deleted {
					// Updated after the snapshot: the body is the state's
					// version, not the listing's.
					err := verifyHeld(ctx, s.Sink.(sink.Inventory), uri, r.checked(fixity.Expect{Length: rec.Length, Hashes: rec.Hashes}))
					switch {
					case err == nil:
						sa.noteNewer(uri)
						return inv.MarkHeld(ctx, uri, s.name)
					case !errors.Is(err, fixity.ErrMismatch):
						return fmt.Errorf("audit: reading %s from %s: %w", uri, s.name, err)
					}
				}
				sa.Mismatched++
				mismatched[s.name+"\x00"+uri] = true
				if len(sa.Mismatch) < maxAuditList {
					sa.Mismatch = append(sa.Mismatch, uri)
				}
				if n && !rec.Deleted {
					// The state's version is newer than the snapshot: a
					// repair from the snapshot would roll it back.
					ask(rec)
					return nil
				}
				forget = append(forget, uri)
				return nil // not marked held: it must be fetched again
			}
			return inv.MarkHeld(ctx, uri, s.name)
		})
		if err != nil {
			return nil, err
		}
		if err := inv.Missing(ctx, s.name, func(l state.Listed) error {
			if mismatched[s.name+"\x00"+l.URI] {
				return nil
			}
			rec, n, err := newer(ctx, l.URI)
			switch {
			case err != nil:
				return err
			case n && rec.Deleted:
				sa.noteNewer(l.URI) // deleted after the snapshot
				return nil
			}
			sa.noteMissing(l.URI)
			if n {
				// Held at a version newer than the snapshot's: fetching
				// the snapshot's would roll it back.
				ask(rec)
				return nil
			}
			forget = append(forget, l.URI) // fetched again from the snapshot
			return nil
		}); err != nil {
			return nil, err
		}
		// What the state holds of the source that the listing does not
		// name (created after the snapshot, or no longer listed), and the
		// sink lacks.
		if err := opts.Store.WalkResources(ctx, opts.SourceKey, func(rec state.Resource) error {
			if rec.Deleted || (rec.Outcome != state.OutcomeWritten && rec.Outcome != state.OutcomeUnchanged) {
				return nil // held by no sink: a failure, or a delete
			}
			if _, listed, err := inv.Lookup(ctx, rec.URI); err != nil || listed {
				return err
			}
			if held, err := inv.Held(ctx, rec.URI, s.name); err != nil || held {
				return err
			}
			_, n, err := newer(ctx, rec.URI)
			if err != nil {
				return err
			}
			sa.noteMissing(rec.URI)
			if n {
				ask(rec) // created after the snapshot
			} else {
				unlisted = append(unlisted, rec.URI) // no longer listed, nor held: forgotten
			}
			return nil
		}); err != nil {
			return nil, err
		}
		ar.Sinks = append(ar.Sinks, sa)
	}
	if repair && len(ar.Problems) > 0 && len(extras)+len(unlisted) > 0 {
		// What only the part that failed lists looks extra: a harvest
		// looks for what is no longer listed only after a whole listing.
		ar.KeptExtra, extras, unlisted = len(extras) > 0, nil, nil
	}
	var limitErr error
	if repair && opts.MaxDelete.IsSet() && len(extras) > 0 {
		held, err := opts.Store.CountResources(ctx, opts.SourceKey, false)
		if err != nil {
			return nil, err
		}
		g := &deleteGuard{limit: opts.MaxDelete.of(held), held: held, spec: opts.MaxDelete, dry: opts.DryRun, would: int64(len(extras))}
		limitErr = g.check()
	}
	if limitErr != nil && !opts.DryRun {
		return ar, limitErr
	}
	if repair && !ar.Clean() && opts.DryRun {
		ar.DryRun = true
		for _, uri := range extras {
			for _, s := range extraIn[uri] {
				r.preview(Preview{Action: PreviewDelete, URI: uri + " (from " + s.name + ")", Length: -1})
			}
			ar.Removed++
		}
		for _, uri := range forget {
			r.preview(Preview{Action: PreviewFetch, URI: uri, Length: -1})
		}
		for _, rec := range requeue {
			r.preview(Preview{Action: PreviewFetch, URI: rec.URI + " (by the next harvest, at the source's current version)", Length: -1})
		}
		if limitErr != nil {
			return ar, limitErr
		}
	}
	if repair && !ar.Clean() && !opts.DryRun {
		// The state forgets first: a repair stopped before the sinks
		// are done leaves them holding what the state does not, which
		// the next audit finds extra again — never the state claiming
		// what no sink holds.
		if err := opts.Store.ForgetResources(ctx, opts.SourceKey, slices.Concat(forget, extras, unlisted), opts.Fence); err != nil {
			return nil, err
		}
		for _, uri := range extras {
			for _, s := range extraIn[uri] {
				if err := r.deleteFrom(ctx, s, uri); err != nil {
					return nil, fmt.Errorf("repair: removing %s from %s: %w", uri, s.name, err)
				}
			}
			ar.Removed++
		}
		// A sink that only queues its writes (sink.Batcher) applies the
		// removals now.
		for _, s := range r.sinks {
			if bs, ok := s.Sink.(sink.Batcher); ok {
				if failed := bs.Flush(ctx); len(failed) > 0 {
					return nil, fmt.Errorf("repair: removing %s from %s (and %d more): %w", failed[0].URI, s.name, len(failed)-1, failed[0].Err)
				}
			}
		}
		rep, err := Baseline(ctx, opts)
		ar.Repair = rep
		if err != nil {
			return ar, err
		}
		if err := r.askAgain(ctx, requeue); err != nil {
			return ar, err
		}
	}
	ar.Finished = time.Now().UTC()
	return ar, nil
}

// noteMissing counts uri missing.
func (sa *SinkAudit) noteMissing(uri string) {
	sa.Missing++
	if len(sa.MissingURI) < maxAuditList {
		sa.MissingURI = append(sa.MissingURI, uri)
	}
}

// heldByOthers returns the test of whether the state records uri as a
// resource of another source held in the run's sinks (see
// state.OtherSources): one sink may hold several sources.
func (r *run) heldByOthers(ctx context.Context) (func(ctx context.Context, uri string) (bool, error), error) {
	names := make([]string, len(r.sinks))
	for i, s := range r.sinks {
		names[i] = s.name
	}
	srcs, err := r.opts.Store.OtherSources(ctx, r.opts.SourceKey, names)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, uri string) (bool, error) {
		for _, src := range srcs {
			rec, ok, err := r.opts.Store.Resource(ctx, src, uri)
			if err != nil {
				return false, err
			}
			if ok && !rec.Deleted {
				return true, nil
			}
		}
		return false, nil
	}, nil
}

// askAgain has the next harvest fetch recs again at the source's current
// version (see AuditReport.NotRepaired): each kept as a retry first, then
// its record forgotten, so that a repair stopped between leaves the retry
// (which finds the record unchanged) rather than a record no retry
// restores.
func (r *run) askAgain(ctx context.Context, recs []state.Resource) error {
	if len(recs) == 0 {
		return nil
	}
	b := state.Batch{Retries: make([]state.Retry, 0, len(recs)), Fence: r.opts.Fence}
	uris := make([]string, 0, len(recs))
	for _, rec := range recs {
		b.Retries = append(b.Retries, r.retryOf(&source.Record{URI: rec.URI, ResourceSet: rec.ResourceSet, Listed: rec.Package, Length: -1, ChangeTime: rec.ChangeTime}))
		uris = append(uris, rec.URI)
	}
	if err := r.opts.Store.Commit(ctx, b); err != nil {
		return fmt.Errorf("repair: asking for %d resources again: %w", len(recs), err)
	}
	return r.opts.Store.ForgetResources(ctx, r.opts.SourceKey, uris, r.opts.Fence)
}

// noteNewer counts uri newer than the snapshot.
func (sa *SinkAudit) noteNewer(uri string) {
	sa.Newer++
	if len(sa.NewerURI) < maxAuditList {
		sa.NewerURI = append(sa.NewerURI, uri)
	}
}

// newerThanSnapshot returns the test of a resource against the snapshot
// the audit's listing was (each resource set's at, the checkpoint a
// baseline of it reaches): the state's record of uri (zero when none),
// and whether it records a change at or after its set's snapshot — one
// the snapshot does not show. A set whose snapshot has no time cannot be
// told so: nothing of it is newer.
func (r *run) newerThanSnapshot(opts Options) func(ctx context.Context, uri string) (state.Resource, bool, error) {
	at := map[string]time.Time{}
	for _, cp := range r.checkpoints {
		at[cp.ResourceSet] = cp.Next
	}
	return func(ctx context.Context, uri string) (state.Resource, bool, error) {
		rec, ok, err := opts.Store.Resource(ctx, opts.SourceKey, uri)
		if err != nil || !ok {
			return rec, false, err
		}
		snap, ok := at[rec.ResourceSet]
		return rec, ok && !snap.IsZero() && !rec.ChangeTime.Before(snap), nil
	}
}

// verifyHeld reads a held body and checks it against want, the source's
// listing.
func verifyHeld(ctx context.Context, inv sink.Inventory, uri string, want fixity.Expect) error {
	rc, err := inv.Get(ctx, uri)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr := fixity.NewReader(rc, want, fixity.Compute{})
	_, err = io.Copy(io.Discard, vr)
	return err
}

// inventory lists what the source publishes into inv: the run executes a
// baseline task as a listing (see listing) — Resource List entries,
// and the entries of each package's listing (its
// rel="contents" copy when there is one, else the package's manifest.xml,
// read by Range where the server allows). What could not be read is
// returned as the audit's problems.
func (r *run) inventory(ctx context.Context, inv *state.Inventory) ([]runreport.Failure, error) {
	r.mode = listing{inv}
	if err := r.execute(ctx, r.task(source.Baseline, Range{})); err != nil {
		return nil, err
	}
	var rep runreport.Report
	r.rec.fill(&rep, r.counts)
	return rep.Failures, nil
}
