package resourcesync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
)

// maxDocDepth bounds how deeply documents may point at further documents
// (description → capability list → dump index → … → dump).
const maxDocDepth = 10

// WellKnownURL returns the Source Description location of a site:
// scheme://host/.well-known/resourcesync (spec §6.2).
func WellKnownURL(site string) (string, error) {
	u, err := url.Parse(site)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errclass.Fatalf("source %q: not an absolute URL", site)
	}
	return u.Scheme + "://" + u.Host + "/.well-known/resourcesync", nil
}

// Plan plans task (see source.Planner): it walks from task.Source to the
// task's documents — Resource Dumps (Resource Lists where no dump exists)
// for a baseline, Change Dumps (Change Lists) for an incremental task. A
// baseline's packages, and a Resource List's entries as records, are
// emitted as the walk meets them. An incremental task's range is resolved
// per resource set from held's checkpoints; index children and packages
// outside it are not read; the changes in range of the packages and Change
// Lists within it are read, and only each resource's latest change is
// emitted (see planChanges). A bare site URL starts at its
// /.well-known/resourcesync. When that start document cannot be read, or
// is not ResourceSync (an HTML page, say), full discovery runs instead
// (robots.txt Sitemap lines, an HTML <link rel="resourcesync">, a Link
// header) and the walk starts again from what it finds: the Source
// Description, or the one Capability List. Nothing is fetched twice on the
// usual path. An error reading the source itself is a *source.SourceError.
// A task with a Part emits that part's plan (Task.PartPlan), reading
// nothing (see Parts).
func (d *Planner) Plan(ctx context.Context, task source.Task, held source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	if task.Part != "" {
		return d.planPart(ctx, task, emit)
	}
	w := &walk{Planner: d, task: task, held: held, out: emit, now: time.Now().UTC(), sets: map[string]*source.Checkpoint{},
		maxDepth: maxDocDepth, open: func(ctx context.Context, u string) (entries, func(), error) { return d.openDocument(ctx, u) }}
	switch task.Mode {
	case source.Baseline:
		w.want, w.list = manifest.ResourceDump, manifest.ResourceList
	case source.Incremental:
		w.want, w.list = manifest.ChangeDump, manifest.ChangeList
	default:
		return nil, errclass.Fatalf("resourcesync: no such task mode %q", task.Mode)
	}
	start, err := w.start(ctx, task.Source)
	switch {
	case err == nil:
	case w.stop != nil:
		return nil, w.stop
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errclass.IsFatal(err):
		return nil, err
	default:
		var se *source.SourceError
		if !errors.As(err, &se) {
			err = &source.SourceError{URL: start, Err: err}
		}
		return nil, err
	}
	if err := w.planChanges(ctx); err != nil {
		if w.stop != nil {
			return nil, w.stop
		}
		return nil, err
	}
	if len(w.pending) == 0 {
		if err := w.retry(ctx, nil); err != nil {
			return nil, err
		}
	}
	cps := make([]source.Checkpoint, 0, len(w.sets))
	for _, cp := range w.sets {
		cp.DescribedBy = w.describedBy
		cps = append(cps, *cp)
	}
	slices.SortFunc(cps, func(a, b source.Checkpoint) int { return strings.Compare(a.ResourceSet, b.ResourceSet) })
	return cps, nil
}

// start walks from src, by discovery when src does not lead to a
// ResourceSync document, and returns where the walk started.
func (w *walk) start(ctx context.Context, src string) (string, error) {
	start := src
	bare := isBareSite(src)
	if bare {
		wk, err := WellKnownURL(src)
		if err != nil {
			return src, err
		}
		start = wk
	}
	err := w.walk(ctx, start, "", top(start))
	if err == nil || w.started || ctx.Err() != nil || errclass.IsFatal(err) || errors.Is(err, fetch.ErrUnreachable) ||
		!(bare || errors.Is(err, manifest.ErrNotResourceSync) || errors.Is(err, manifest.ErrMalformed)) {
		return start, err // discovery would ask the same host again
	}
	start, how, derr := locate(ctx, w.Client, src, Options{MaxDocumentSize: w.MaxDocumentSize, Logger: w.Log})
	if derr != nil {
		if ctx.Err() != nil {
			return src, ctx.Err()
		}
		return src, derr
	}
	w.Log.Info("source found", "how", how, "start", start)
	w.visited = map[string]bool{}
	return start, w.walk(ctx, start, "", top(start))
}

// isBareSite reports whether a source URL names a site rather than a document.
func isBareSite(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == ""
}

// Planner is the ResourceSync planner (a source.Planner). It reads index
// documents lazily: a child document is only fetched when the walk reaches
// it, so nothing but the current path of documents is open. How documents
// are read is the executor's: the fields below. A Planner may plan several
// tasks, one after another or at once.
type Planner struct {
	// Open reads the bytes of one ResourceSync document (the executor
	// decides how: caps, conditional requests, decompression).
	Open func(ctx context.Context, url string) (io.ReadCloser, error)
	// Document caps what the planner's XML reader accepts of every
	// document and manifest (its Logger: Log when nil).
	Document manifest.Options
	// Client, MaxDocumentSize and Log serve full discovery, when the start
	// document is not ResourceSync (see Plan); Log also takes warnings.
	Client          *fetch.Client
	MaxDocumentSize int64
	Log             *slog.Logger
	// PreferList walks a resource set's Resource or Change List before
	// its dump.
	PreferList bool
	// ViaIdentity holds a resource an aggregator republishes (its loc the
	// aggregator's copy, an rs:ln rel="via" naming the original) under
	// the original's URI; its bytes still come from the aggregator.
	ViaIdentity bool
	// OpenPackage opens the manifest.xml inside a change package that
	// links no copy of it (rel="contents"), for an incremental task: the
	// executor downloads the package, and may keep it to apply its
	// winners. An error naming its stage is a *source.StageError.
	OpenPackage func(ctx context.Context, p source.Package) (io.ReadCloser, error)
	// Concurrency is how many change packages an incremental task reads
	// at once (at least 1).
	Concurrency int
	// ScratchDir holds an incremental task's plan while it is made
	// (default: the system's temporary directory).
	ScratchDir string
}

var _ source.Planner = (*Planner)(nil)

// walk is one task's walk.
type walk struct {
	*Planner
	task source.Task
	held source.Holdings
	out  func(context.Context, source.Unit) error
	// stop is an error that ends the whole plan, never read as one
	// broken resource set: the emit function's, or why a set's range
	// could not be resolved.
	stop error
	now  time.Time
	// want is the capability the walk is for (ResourceDump or
	// ChangeDump); list is its list-based fallback.
	want, list manifest.Capability
	// sets are the checkpoints of the resource sets met, by set.
	sets map[string]*source.Checkpoint
	// describedBy is the Source Description or Capability List the walk
	// started from, once read (source.Checkpoint.DescribedBy).
	describedBy string
	// pending are the change packages (and Change Lists) of an
	// incremental task met in range, in the walk's order, for
	// planChanges.
	pending []source.Package

	// open reads a document for the walk: the Planner's Open, or the
	// map's reader when the walk maps a source (survey).
	open func(ctx context.Context, url string) (entries, func(), error)
	// maxDepth bounds the trail (maxDocDepth when planning).
	maxDepth int
	// survey is set when the walk maps a source for Discover instead of
	// planning a task (see survey.go).
	survey *survey

	visited  map[string]bool
	setsSeen int
	// firstSet is the first resource set --set named (see setsSeen).
	firstSet string
	// setsBroken counts the resource sets of a Source Description whose
	// documents could not be read.
	setsBroken int
	// started is set once the walk's first document opened.
	started bool
	// retries are the records of the sets met whose own failure is
	// outstanding (an incremental task's), emitted after the plan.
	retries []source.Record
	// cover, while an incremental task walks the capability a Capability
	// List offers, takes the from of its first (top) change document:
	// where what it covers begins.
	cover *coverage
	// gap, while the walk reads the other capability for the changes
	// the preferred one does not cover, is where those begin to be
	// covered: only changes before it are read (gaps, one per pending).
	gap  time.Time
	gaps []time.Time
}

// coverage is where the changes a capability covers begin: its top
// document's from, once seen.
type coverage struct {
	from time.Time
	seen bool
}

// noteCover records the from of a change document's header as where the
// walked capability's coverage begins, if it is the capability's first.
func (w *walk) noteCover(h *manifest.Header) {
	if w.cover != nil && !w.cover.seen {
		w.cover.from, w.cover.seen = h.Metadata.From, true
	}
}

// offered walks capability c of the Capability List capList, its entry e.
// In an incremental task, when c's changes begin after the range's start
// — a Change Dump kept for less time than the Change List — the changes
// before are read from other, the other capability offered (nil: none;
// the gap is logged).
func (w *walk) offered(ctx context.Context, here *trail, c manifest.Capability, e, other *manifest.Entry, capList string) error {
	if w.task.Mode != source.Incremental {
		return w.child(ctx, here, e, capList)
	}
	cover := &coverage{}
	w.cover = cover
	err := w.child(ctx, here, e, capList)
	w.cover = nil
	if err != nil {
		return err
	}
	cp := w.sets[capList]
	if cp == nil || cover.from.IsZero() || !cover.from.After(cp.From) {
		return nil
	}
	if other == nil {
		w.Log.Warn("the changes the source publishes begin after the range's start; those between are not published",
			"capability", capName(c), "document", e.Loc, "from", cover.from, "range_from", cp.From)
		return nil
	}
	w.Log.Info("the changes of the capability begin after the range's start; those before are read from the other capability offered",
		"capability", capName(c), "document", e.Loc, "from", cover.from, "range_from", cp.From, "other", other.Loc)
	w.gap = cover.from
	defer func() { w.gap = time.Time{} }()
	return w.child(ctx, here, other, capList)
}

// set returns the checkpoint of resource set, resolving an incremental
// task's range for it the first time: from the task's From, else the
// set's checkpoint in held; until the task's Until, else now.
func (w *walk) set(ctx context.Context, set string) (*source.Checkpoint, error) {
	if cp, ok := w.sets[set]; ok {
		return cp, nil
	}
	cp := &source.Checkpoint{ResourceSet: set}
	if w.task.Mode == source.Incremental {
		resumed, err := source.Resume(ctx, w.task, w.held, set)
		if err != nil {
			w.stop = err
			return nil, err
		}
		*cp = resumed
		if cp.Until.IsZero() {
			cp.Until = w.now
		}
		if cp.From.After(cp.Until) {
			cp.Until = cp.From // a checkpoint in the future: an empty range
		}
		cp.Next = cp.From
		if !w.task.Until.IsZero() {
			// Never past now: what the source publishes later, dated
			// before an until to come, is read by the next run.
			cp.Next = cp.Until
			if cp.Next.After(w.now) {
				cp.Next = w.now
			}
			if cp.Next.Before(cp.From) {
				cp.Next = cp.From
			}
		}
	}
	w.sets[set] = cp
	if w.task.Mode == source.Incremental && w.survey == nil {
		recs, err := w.held.Retries(ctx, set)
		if err != nil {
			w.stop = err
			return nil, err
		}
		w.retries = append(w.retries, recs...)
	}
	return cp, nil
}

// retry emits, after the plan's own units, the records whose own
// permanent failure is outstanding in the sets the task met, each to GET
// from its URI and verify against what was listed of it (or to delete):
// the checkpoint moved past them, so only this asks for them again. One
// the plan has a change of (covered reports it) is left to that change.
func (w *walk) retry(ctx context.Context, covered func(uri string) (bool, error)) error {
	for i := range w.retries {
		rec := w.retries[i]
		if covered != nil {
			ok, err := covered(rec.URI)
			if err != nil {
				w.stop = err
				return err
			}
			if ok {
				continue
			}
		}
		rec.Path, rec.Seq = "", 0
		if err := w.emit(ctx, source.Unit{Record: &rec}); err != nil {
			return err
		}
	}
	return nil
}

// noteAt lowers a baseline's checkpoint of set to snapshot time at, never
// past now: a snapshot dated in the future (a producer's clock) would
// otherwise have the next runs read an empty range until then.
func (w *walk) noteAt(ctx context.Context, set string, at time.Time) error {
	cp, err := w.set(ctx, set)
	if err != nil {
		return err
	}
	if at.After(w.now) {
		w.Log.Warn("snapshot dated in the future; the checkpoint is now instead", "resource_set", set, "at", at, "now", w.now)
		at = w.now
	}
	if !at.IsZero() && (cp.Next.IsZero() || at.Before(cp.Next)) {
		cp.Next, cp.Baseline = at, at
	}
	return nil
}

// inRange reports whether an index child or package of set covering
// [from, until] may hold changes of an incremental task (a baseline takes
// everything).
func (w *walk) inRange(ctx context.Context, set string, from, until time.Time) (bool, error) {
	if w.task.Mode != source.Incremental {
		return true, nil
	}
	cp, err := w.set(ctx, set)
	if err != nil {
		return false, err
	}
	if !w.gap.IsZero() && !from.IsZero() && !from.Before(w.gap) {
		return false, nil // covered by the capability preferred
	}
	if !from.IsZero() && !until.IsZero() && until.Before(from) {
		// Bounds that say nothing: it is read, its entries judged by
		// their own times.
		w.Log.Warn("a document's until is before its from; read whatever the range", "resource_set", set, "from", from, "until", until)
		return true, nil
	}
	return source.Intersects(from, until, cp.From, cp.Until), nil
}

// document notes a change document (not index) of an incremental task:
// emitted for the state's record, and an open one marks its set open.
func (w *walk) document(ctx context.Context, docURL, set string, h *manifest.Header) error {
	if w.task.Mode != source.Incremental {
		return nil
	}
	cp, err := w.set(ctx, set)
	if err != nil {
		return err
	}
	if h.Metadata.Until.IsZero() {
		cp.Open = true
	}
	return w.emit(ctx, source.Unit{Document: &source.Document{URL: docURL, ResourceSet: set,
		Capability: string(h.Metadata.Capability), From: h.Metadata.From, Until: h.Metadata.Until}})
}

// pkg emits a package of a baseline, or keeps a change package in an
// incremental task's range for planChanges.
func (w *walk) pkg(ctx context.Context, j source.Package) error {
	if !j.List {
		j.Index = w.index(&j, w.want == manifest.ChangeDump)
	}
	if ok, err := w.inRange(ctx, j.ResourceSet, j.From, j.Until); err != nil {
		return err
	} else if !ok {
		w.Log.Debug("package outside the range; not requested", "package", j.URL)
		return nil
	}
	if w.task.Mode == source.Incremental {
		w.pending = append(w.pending, j)
		w.gaps = append(w.gaps, w.gap)
		return nil
	}
	if err := w.noteAt(ctx, j.ResourceSet, j.At); err != nil {
		return err
	}
	return w.emit(ctx, source.Unit{Package: &j})
}

// emit hands u to the task's emit function; an error it returns ends the
// plan.
func (w *walk) emit(ctx context.Context, u source.Unit) error {
	if err := w.out(ctx, u); err != nil {
		w.stop = err
		return err
	}
	return nil
}

// fail emits a failure met while planning.
func (w *walk) fail(ctx context.Context, f source.Failure) error {
	return w.emit(ctx, source.Unit{Failure: &f})
}

// RecordOf returns the record a document or manifest entry describes, in
// resource set set, listed by listed, whose snapshot time is at: an entry
// without a change time (datetime or lastmod) is as new as its snapshot.
func RecordOf(e *manifest.Entry, set, listed string, at time.Time) *source.Record {
	md := &e.Metadata
	rec := &source.Record{URI: e.Loc, ResourceSet: set, Listed: listed, Change: source.Change(md.Change), ChangeTime: e.ChangeTime(),
		Length: md.Length, Hashes: md.Hashes, Type: md.Type, Lastmod: e.Lastmod, Path: md.Path}
	if rec.ChangeTime.IsZero() {
		rec.ChangeTime = at
	}
	if len(e.Links) > 0 {
		rec.Links = make([]source.Link, len(e.Links))
		for i, l := range e.Links {
			rec.Links[i] = source.Link{Rel: l.Rel, Href: l.Href, Type: l.Type, Pri: l.Pri, Modified: l.Modified, Hashes: l.Hashes, Length: l.Length}
		}
	}
	// Where the bytes are fetched from, outside a package: the loc, then
	// its mirrors (rel="duplicate", by priority). A loc that is not a URL
	// (an OAI-PMH identifier republished) only identifies the resource:
	// its first mirror is where its bytes are.
	if ms := mirrors(e); len(ms) > 0 && CheckLoc(e.Loc) != nil {
		rec.Location, rec.Mirrors = ms[0], ms[1:]
	} else if len(ms) > 0 {
		rec.Mirrors = ms
	}
	return rec
}

// recordOf is RecordOf, held under the original's URI when via is set
// and the entry names one (Planner.ViaIdentity): its bytes are still
// fetched from the entry's loc.
func recordOf(e *manifest.Entry, set, listed string, at time.Time, via bool) *source.Record {
	rec := RecordOf(e, set, listed, at)
	if !via {
		return rec
	}
	if l, ok := e.Link("via"); ok && l.Href != "" && l.Href != rec.URI {
		if rec.Location == "" {
			rec.Location = rec.URI
		}
		rec.URI = l.Href
	}
	return rec
}

// mirrors returns an entry's rel="duplicate" locations that can be
// fetched, by priority.
func mirrors(e *manifest.Entry) []string {
	var ls []manifest.Link
	for _, l := range e.Links {
		if l.Rel == "duplicate" && CheckLoc(l.Href) == nil {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return nil
	}
	slices.SortStableFunc(ls, func(a, b manifest.Link) int { return cmp.Compare(a.Pri, b.Pri) })
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Href
	}
	return out
}

// MatchesSet reports whether a --set name names the capability list at
// capList: its URL, or the last segment of its path without extension
// ("dataset1" for …/dataset1/capabilitylist.xml is not enough: the last
// segment is "capabilitylist", so the directory is tried too).
func MatchesSet(name, capList string) bool {
	if name == capList {
		return true
	}
	u, err := url.Parse(capList)
	if err != nil {
		return false
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := len(segs) - 1; i >= 0 && i >= len(segs)-2; i-- {
		seg := segs[i]
		if j := strings.LastIndex(seg, "."); j > 0 {
			seg = seg[:j]
		}
		if seg == name {
			return true
		}
	}
	return false
}

// walk reads the document at the end of here, of resource set resourceSet
// ("" above the sets), and plans what the task needs of it.
func (w *walk) walk(ctx context.Context, docURL, resourceSet string, here *trail) (err error) {
	if w.visited == nil {
		w.visited = map[string]bool{}
	}
	w.visited[docURL] = true
	rd, closeDoc, err := w.open(ctx, docURL)
	if err != nil {
		return err
	}
	w.started = true
	defer closeDoc()
	h := rd.Header()
	if c := h.Metadata.Capability; here.depth == 0 && (c == manifest.Description || c == manifest.CapabilityList) {
		w.describedBy = docURL // where the walk starts, as discovered
	}
	if w.survey != nil && here.depth > 0 {
		return w.surveyed(ctx, rd, here)
	}
	if c := h.Metadata.Capability; here.depth == 0 && w.task.Set != "" && c != manifest.Description && !MatchesSet(w.task.Set, docURL) {
		// The source is one resource set's document: --set must name it.
		return errclass.Fatalf("%s: no resource set (capability list) named %q: the source is the %s of another", docURL, w.task.Set, capName(c))
	}
	switch h.Metadata.Capability {
	case manifest.Description:
		var firstBroken error
		defer func() {
			if w.task.Set != "" && w.setsSeen == 0 && err == nil {
				err = errclass.Fatalf("%s: no resource set (capability list) named %q", docURL, w.task.Set)
			}
			if err == nil && w.setsBroken > 0 && w.setsBroken == w.setsSeen {
				err = firstBroken // not one set could be read: the source could not be
			}
		}()
		listed := map[string]bool{}
		return w.eachEntry(ctx, docURL, "", false, rd, func(e *manifest.Entry) error {
			if c := e.Metadata.Capability; c != "" && c != manifest.CapabilityList {
				w.Log.Warn("source description entry is not a capability list; skipped", "document", docURL, "entry", e.Loc, "capability", c)
				return nil
			}
			if listed[e.Loc] {
				w.Log.Warn("capability list listed twice; read once", "document", docURL, "entry", e.Loc)
				return nil
			}
			listed[e.Loc] = true
			if w.task.Set != "" && !MatchesSet(w.task.Set, e.Loc) {
				return nil
			}
			if w.task.Set != "" && w.setsSeen > 0 {
				// --set names one resource set: a name two share stops
				// the run, naming the second (the first is planned).
				return errclass.Fatalf("%s: --set %q names more than one resource set (%s, %s, …): give the capability list's URL", docURL, w.task.Set, w.firstSet, e.Loc)
			}
			if w.setsSeen == 0 {
				w.firstSet = e.Loc
			}
			w.setsSeen++
			werr := w.child(ctx, here, e, e.Loc)
			if werr == nil || ctx.Err() != nil || w.stop != nil || errclass.IsFatal(werr) || errors.Is(werr, source.ErrNotOffered) {
				return werr
			}
			// One broken resource set does not stop the others: it is
			// recorded as that set's failure, its checkpoint is held, and
			// the walk goes on with the next set.
			w.setsBroken++
			if firstBroken == nil {
				firstBroken = werr
			}
			return w.fail(ctx, source.Failure{URI: e.Loc, ResourceSet: e.Loc, Stage: "resource set", Err: werr, WholeSet: true})
		})
	case manifest.CapabilityList:
		// A capability list is small: note what it offers, then walk the
		// preferred capability (a dump; its list where no dump exists).
		if w.survey != nil {
			return w.eachEntry(ctx, docURL, docURL, false, rd, func(e *manifest.Entry) error { return w.child(ctx, here, e, docURL) })
		}
		offers := map[manifest.Capability]*manifest.Entry{}
		if err := w.eachEntry(ctx, docURL, docURL, false, rd, func(e *manifest.Entry) error {
			if _, dup := offers[e.Metadata.Capability]; !dup {
				offers[e.Metadata.Capability] = e
			}
			return nil
		}); err != nil {
			return err
		}
		order := []manifest.Capability{w.want, w.list}
		if w.PreferList {
			order = []manifest.Capability{w.list, w.want}
		}
		for i, c := range order {
			if e, ok := offers[c]; ok && c != "" {
				var other *manifest.Entry
				if i == 0 && order[1] != "" {
					other = offers[order[1]]
				}
				return w.offered(ctx, here, c, e, other, docURL)
			}
		}
		if w.list != "" {
			return errclass.Permanentf("%s: %w: neither a %s nor a %s", docURL, source.ErrNotOffered, capName(w.want), capName(w.list))
		}
		return errclass.Permanentf("%s: %w: no %s", docURL, source.ErrNotOffered, capName(w.want))
	case manifest.ResourceList:
		if w.list != manifest.ResourceList {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(w.want))
		}
		if h.IsIndex() {
			// The index's at begins the snapshot of every list it holds
			// (a list that repeats none is current to it).
			if err := w.noteAt(ctx, resourceSet, h.Metadata.At); err != nil {
				return err
			}
			return w.eachEntry(ctx, docURL, resourceSet, false, rd, func(e *manifest.Entry) error {
				return w.child(ctx, here, e, resourceSet)
			})
		}
		at := h.Metadata.At
		if err := w.noteAt(ctx, resourceSet, at); err != nil {
			return err
		}
		return w.eachEntry(ctx, docURL, resourceSet, true, rd, func(e *manifest.Entry) error {
			if e.Metadata.Capability == manifest.ResourceList {
				// An index written with a <urlset> root: what it means is clear.
				w.Log.Warn("index document with a <urlset> root; reading its entries as documents", "document", docURL)
				return w.child(ctx, here, e, resourceSet)
			}
			rec := recordOf(e, resourceSet, docURL, at, w.ViaIdentity)
			if rec.Change == source.Deleted {
				rec.Change = "" // listed in a snapshot: the resource is there
			}
			return w.emit(ctx, source.Unit{Record: rec})
		})
	case manifest.ChangeList:
		if w.list != manifest.ChangeList {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(w.want))
		}
		w.noteCover(&h)
		if h.IsIndex() {
			return w.walkIndex(ctx, rd, resourceSet, here)
		}
		if err := w.document(ctx, docURL, resourceSet, &h); err != nil {
			return err
		}
		// The list itself is the unit of planning: its entries are read
		// again by the planner.
		return w.pkg(ctx, source.Package{URL: docURL, Dump: docURL, ResourceSet: resourceSet,
			From: h.Metadata.From, Until: h.Metadata.Until, Contents: docURL, List: true})
	case manifest.ResourceDump, manifest.ChangeDump:
		if h.Metadata.Capability != w.want {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(w.want))
		}
		w.noteCover(&h)
		if h.IsIndex() {
			if w.task.Mode == source.Baseline && h.Metadata.Capability == manifest.ResourceDump {
				// As a Resource List Index's at.
				if err := w.noteAt(ctx, resourceSet, h.Metadata.At); err != nil {
					return err
				}
			}
			return w.walkIndex(ctx, rd, resourceSet, here)
		}
		at := h.Metadata.At
		if err := w.document(ctx, docURL, resourceSet, &h); err != nil {
			return err
		}
		if w.task.Mode == source.Baseline {
			// The dump is a snapshot at its at even with no package.
			if err := w.noteAt(ctx, resourceSet, at); err != nil {
				return err
			}
		}
		return w.eachEntry(ctx, docURL, resourceSet, false, rd, func(e *manifest.Entry) error {
			if e.Metadata.Capability == w.want {
				// An index written with a <urlset> root: what it means is clear.
				w.Log.Warn("index document with a <urlset> root; reading its entries as documents", "document", docURL)
				return w.child(ctx, here, e, resourceSet)
			}
			j := source.Package{
				URL:         e.Loc,
				Expect:      fixity.Expect{Length: e.Metadata.Length, Hashes: e.Metadata.Hashes},
				Dump:        docURL,
				ResourceSet: resourceSet,
				At:          at,
			}
			if !e.Metadata.At.IsZero() {
				j.At = e.Metadata.At
			}
			j.From, j.Until = e.Metadata.From, e.Metadata.Until
			if l, ok := e.Link("contents"); ok && CheckLoc(l.Href) == nil {
				j.Contents = l.Href
			}
			return w.pkg(ctx, j)
		})
	default:
		return errclass.Permanentf("%s: a %s %q document, expected a Source Description, Capability List, %s or %s (or their indexes)",
			docURL, h.Root, h.Metadata.Capability, capName(w.want), capName(w.list))
	}
}

// walkIndex walks the children of a change or dump index, skipping those
// whose [from, until] InRange rejects.
func (w *walk) walkIndex(ctx context.Context, rd entries, resourceSet string, here *trail) error {
	return w.eachEntry(ctx, here.url, resourceSet, false, rd, func(e *manifest.Entry) error {
		if ok, err := w.inRange(ctx, resourceSet, e.Metadata.From, e.Metadata.Until); err != nil || !ok {
			return err
		}
		return w.child(ctx, here, e, resourceSet)
	})
}

// child walks the document entry e names, listed by the document at the
// end of here. A link loop, or nesting deeper than maxDepth, is recorded
// as the entry's permanent failure and the walk goes on; a document this
// run has read already (listed twice, or by two indexes) is not read
// again: what it holds is planned once. A survey maps the child instead.
func (w *walk) child(ctx context.Context, here *trail, e *manifest.Entry, resourceSet string) error {
	u := e.Loc
	next, err := here.down(u, w.maxDepth)
	if w.survey != nil {
		return w.survey.child(here, e, next, err, func() error { return w.walk(ctx, u, resourceSet, next) })
	}
	if err != nil {
		w.Log.Warn("document not followed", "document", here.url, "entry", u, "why", err)
		return w.fail(ctx, source.Failure{URI: u, ResourceSet: resourceSet, Stage: "document", Listed: here.url,
			Err: fmt.Errorf("%s lists %s: %w", here.url, u, err)})
	}
	if w.visited[u] {
		w.Log.Warn("document listed again; read once", "document", here.url, "entry", u)
		return nil
	}
	return w.walk(ctx, u, resourceSet, next)
}

// eachEntry calls fn for every entry of rd, a document of resource set
// set ("": not known yet) that lists resources (records) or documents and
// packages. A malformed entry is recorded as a failure and skipped: in a
// list of resources it is that resource's own, and the resource it names
// by a loc that can be fetched is asked for again by the next incremental
// task (Failure.Retry); otherwise what it names holds records not seen, so
// it holds the set's checkpoint (every set's when the set is not known). A
// broken document ends the walk of that document with an error.
func (w *walk) eachEntry(ctx context.Context, docURL, set string, records bool, rd entries, fn func(*manifest.Entry) error) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			var ee *manifest.EntryError
			if errors.As(err, &ee) {
				uri := ee.Loc
				if uri == "" {
					uri = docURL
				}
				f := invalid(uri, docURL, err, false)
				switch {
				case !records:
					f.ResourceSet, f.WholeSet = set, true
				default:
					f.ResourceSet, f.Retry = set, entryRetry(ee.Loc, ee.Change, set, docURL, time.Time{})
				}
				if err := w.fail(ctx, f); err != nil {
					return err
				}
				continue
			}
			return errclass.About(docURL, err)
		}
		if err := CheckLoc(e.Loc); err != nil && !hasMirror(e) {
			if err := w.fail(ctx, invalid(e.Loc, docURL, err, true)); err != nil {
				return err
			}
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// invalid is the failure of an entry of document docURL that is skipped
// (malformed, or not an absolute http(s) URL): permanent, and one
// resource's when counted.
func invalid(uri, docURL string, err error, counted bool) source.Failure {
	return source.Failure{URI: uri, Stage: "document", Listed: docURL, Err: errclass.NewPermanent(fmt.Errorf("%s: %v", docURL, err)), Resource: counted}
}

// CheckLoc checks that a document's <loc> (or a link's href) is an
// absolute http(s) URL, the only kind rsharvest fetches; its error is
// permanent.
func CheckLoc(loc string) error {
	u, err := url.Parse(loc)
	if err != nil {
		return errclass.Permanentf("loc %q: %w", loc, err)
	}
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return errclass.Permanentf("loc %q: not an absolute http(s) URL", loc)
	}
	return nil
}

// hasMirror reports whether an entry names a copy to fetch from
// (rel="duplicate", an http(s) URL): then its loc need only identify the
// resource, as an OAI-PMH identifier republished over ResourceSync does.
func hasMirror(e *manifest.Entry) bool {
	return len(mirrors(e)) > 0
}

// capName names a capability for messages.
func capName(c manifest.Capability) string {
	switch c {
	case manifest.ResourceDump:
		return "Resource Dump"
	case manifest.ChangeDump:
		return "Change Dump"
	case manifest.ResourceList:
		return "Resource List"
	case manifest.ChangeList:
		return "Change List"
	}
	return string(c)
}

// entryRetry is the record a malformed or refused entry of a list of
// resources names (its loc and change), to ask for again by the next
// task: deleted when its rs:md says so, at change time at. Nil when its
// loc cannot be fetched.
func entryRetry(loc string, change manifest.Change, set, listed string, at time.Time) *source.Record {
	if loc == "" || CheckLoc(loc) != nil {
		return nil
	}
	rec := &source.Record{URI: loc, ResourceSet: set, Listed: listed, Length: -1, ChangeTime: at}
	if change == manifest.Deleted {
		rec.Change = source.Deleted
	}
	return rec
}
