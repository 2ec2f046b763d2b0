package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
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

// ErrNoCapability is wrapped by the error of a run whose capability list
// offers none of the documents the run needs (no Change Dump or Change List
// for an incremental run, say).
var ErrNoCapability = errors.New("the capability list does not offer it")

// Plan walks from source. A bare site URL starts at its
// /.well-known/resourcesync. When that start document cannot be read, or
// is not ResourceSync (an HTML page, say), full discovery runs instead
// (robots.txt Sitemap lines, an HTML <link rel="resourcesync">, a Link
// header) and the walk starts again from what it finds: the Source
// Description, or the one Capability List. It returns where the walk
// started. Nothing is fetched twice on the usual path.
func (d *Planner) Plan(ctx context.Context, source string) (string, error) {
	start := source
	bare := isBareSite(source)
	if bare {
		wk, err := WellKnownURL(source)
		if err != nil {
			return source, err
		}
		start = wk
	}
	err := d.walk(ctx, start, "", 0)
	if err == nil || d.started || ctx.Err() != nil || errclass.IsFatal(err) ||
		!(bare || errors.Is(err, manifest.ErrNotResourceSync)) {
		return start, err
	}
	src, derr := Discover(ctx, d.Client, source, Options{MaxDocumentSize: d.MaxDocumentSize, Logger: d.Log})
	if derr != nil {
		if ctx.Err() != nil {
			return source, ctx.Err()
		}
		return source, derr
	}
	switch {
	case src.Description != "":
		start = src.Description
	case len(src.Sets) == 1:
		start = src.Sets[0].CapabilityList
	default:
		return source, errclass.Permanentf("found %d resource sets but no Source Description", len(src.Sets))
	}
	d.Log.Info("source found", "how", src.Found, "start", start)
	d.visited = map[string]bool{}
	return start, d.walk(ctx, start, "", 0)
}

// isBareSite reports whether a source URL names a site rather than a document.
func isBareSite(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == ""
}

// Planner walks from a source URL to the units of work of a run (the
// packages of its Resource or Change Dumps, or its lists' entries), reading
// index documents lazily: a child document is only fetched when the walk
// reaches it, so nothing but the current path of documents is open. What
// it reads and where its findings go are the run's: the fields below. A
// Planner is used for one walk.
type Planner struct {
	// Open reads one ResourceSync document (the run decides how: caps,
	// conditional requests, decompression); close releases it.
	Open func(ctx context.Context, url string) (rd *manifest.Reader, close func(), err error)
	// Client, MaxDocumentSize and Log serve full discovery, when the start
	// document is not ResourceSync (see Plan); Log also takes warnings.
	Client          *fetch.Client
	MaxDocumentSize int64
	Log             *slog.Logger
	// Set, when not empty, walks only the resource set it names (see
	// MatchesSet).
	Set string
	// Want is the capability the walk is for (ResourceDump or ChangeDump);
	// List is its list-based fallback (ResourceList or ChangeList), and
	// PreferList puts the list first.
	Want, List manifest.Capability
	PreferList bool
	// Emit receives each package (or Change List) to read.
	Emit func(ctx context.Context, p source.Package) error
	// EmitResource receives each entry of a Resource List (baseline).
	EmitResource func(ctx context.Context, docURL, resourceSet string, at time.Time, e *manifest.Entry) error
	// InRange, when set, tells whether an index child covering
	// [from, until] may hold changes of the run (so others are not read).
	InRange func(resourceSet string, from, until time.Time) (bool, error)
	// OnDump, when set, is called with the header of every dump document
	// (not index) read.
	OnDump func(docURL, resourceSet string, h *manifest.Header)
	// NoteAt is told every non-zero snapshot datetime (a dump's or a
	// Resource List's at); NoteSet is told of every Resource List read,
	// with its resource set and at.
	NoteAt  func(at time.Time)
	NoteSet func(resourceSet string, at time.Time)
	// Broken is told of a resource set of a Source Description whose
	// documents could not be read; the walk goes on with the others.
	Broken func(ctx context.Context, capabilityList string, err error)
	// Invalid is told of an entry of a document that is skipped (malformed,
	// or not an absolute http(s) URL): the URI it names (or the
	// document's), and why. counted says the entry is one resource the run
	// counts as failed.
	Invalid func(ctx context.Context, uri, msg string, counted bool)

	visited  map[string]bool
	setsSeen int
	// setsBroken counts the resource sets of a Source Description whose
	// documents could not be read (see Broken).
	setsBroken int
	// started is set once the walk's first document opened.
	started bool
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

func (d *Planner) walk(ctx context.Context, docURL, resourceSet string, depth int) (err error) {
	if depth > maxDocDepth {
		return errclass.Permanentf("%s: documents nested more than %d deep", docURL, maxDocDepth)
	}
	if d.visited == nil {
		d.visited = map[string]bool{}
	}
	if d.visited[docURL] {
		return errclass.Permanentf("%s: link loop: the document was already read in this run", docURL)
	}
	d.visited[docURL] = true
	rd, closeDoc, err := d.Open(ctx, docURL)
	if err != nil {
		return err
	}
	d.started = true
	defer closeDoc()
	h := rd.Header()
	switch h.Metadata.Capability {
	case manifest.Description:
		var firstBroken error
		defer func() {
			if d.Set != "" && d.setsSeen == 0 && err == nil {
				err = errclass.Fatalf("%s: no resource set (capability list) named %q", docURL, d.Set)
			}
			if err == nil && d.setsBroken > 0 && d.setsBroken == d.setsSeen {
				err = firstBroken // not one set could be read: the source could not be
			}
		}()
		return d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
			if c := e.Metadata.Capability; c != "" && c != manifest.CapabilityList {
				d.Log.Warn("source description entry is not a capability list; skipped", "document", docURL, "entry", e.Loc, "capability", c)
				return nil
			}
			if d.Set != "" && !MatchesSet(d.Set, e.Loc) {
				return nil
			}
			d.setsSeen++
			werr := d.walk(ctx, e.Loc, e.Loc, depth+1)
			if werr == nil || ctx.Err() != nil || errclass.IsFatal(werr) || errors.Is(werr, ErrNoCapability) {
				return werr
			}
			// One broken resource set does not stop the others: it is
			// recorded as that set's failure, its checkpoint is held, and
			// the walk goes on with the next set.
			d.setsBroken++
			if firstBroken == nil {
				firstBroken = werr
			}
			d.Broken(ctx, e.Loc, werr)
			return nil
		})
	case manifest.CapabilityList:
		// A capability list is small: note what it offers, then walk the
		// preferred capability (a dump; its list where no dump exists).
		offers := map[manifest.Capability]string{}
		if err := d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
			if _, dup := offers[e.Metadata.Capability]; !dup {
				offers[e.Metadata.Capability] = e.Loc
			}
			return nil
		}); err != nil {
			return err
		}
		order := []manifest.Capability{d.Want, d.List}
		if d.PreferList {
			order = []manifest.Capability{d.List, d.Want}
		}
		for _, c := range order {
			if loc, ok := offers[c]; ok && c != "" {
				return d.walk(ctx, loc, docURL, depth+1)
			}
		}
		if d.List != "" {
			return errclass.Permanentf("%s: %w: neither a %s nor a %s", docURL, ErrNoCapability, capName(d.Want), capName(d.List))
		}
		return errclass.Permanentf("%s: %w: no %s", docURL, ErrNoCapability, capName(d.Want))
	case manifest.ResourceList:
		if d.List != manifest.ResourceList {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(d.Want))
		}
		if h.IsIndex() {
			return d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
				return d.walk(ctx, e.Loc, resourceSet, depth+1)
			})
		}
		at := h.Metadata.At
		if !at.IsZero() {
			d.NoteAt(at)
		}
		d.NoteSet(resourceSet, at)
		return d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
			if e.Metadata.Capability == manifest.ResourceList {
				// An index written with a <urlset> root: what it means is clear.
				d.Log.Warn("index document with a <urlset> root; reading its entries as documents", "document", docURL)
				return d.walk(ctx, e.Loc, resourceSet, depth+1)
			}
			return d.EmitResource(ctx, docURL, resourceSet, at, e)
		})
	case manifest.ChangeList:
		if d.List != manifest.ChangeList {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(d.Want))
		}
		if h.IsIndex() {
			return d.walkIndex(ctx, docURL, rd, resourceSet, depth)
		}
		if d.OnDump != nil {
			d.OnDump(docURL, resourceSet, &h)
		}
		// The list itself is the unit of planning: its entries are read
		// again by the planner.
		return d.Emit(ctx, source.Package{URL: docURL, Dump: docURL, ResourceSet: resourceSet,
			From: h.Metadata.From, Until: h.Metadata.Until, Contents: docURL, List: true})
	case manifest.ResourceDump, manifest.ChangeDump:
		if h.Metadata.Capability != d.Want {
			return errclass.Permanentf("%s: a %s document, expected a %s", docURL, capName(h.Metadata.Capability), capName(d.Want))
		}
		if h.IsIndex() {
			return d.walkIndex(ctx, docURL, rd, resourceSet, depth)
		}
		at := h.Metadata.At
		if !at.IsZero() {
			d.NoteAt(at)
		}
		if d.OnDump != nil {
			d.OnDump(docURL, resourceSet, &h)
		}
		return d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
			if e.Metadata.Capability == d.Want {
				// An index written with a <urlset> root: what it means is clear.
				d.Log.Warn("index document with a <urlset> root; reading its entries as documents", "document", docURL)
				return d.walk(ctx, e.Loc, resourceSet, depth+1)
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
			return d.Emit(ctx, j)
		})
	default:
		return errclass.Permanentf("%s: a %s %q document, expected a Source Description, Capability List, %s or %s (or their indexes)",
			docURL, h.Root, h.Metadata.Capability, capName(d.Want), capName(d.List))
	}
}

// walkIndex walks the children of a change or dump index, skipping those
// whose [from, until] InRange rejects.
func (d *Planner) walkIndex(ctx context.Context, docURL string, rd *manifest.Reader, resourceSet string, depth int) error {
	return d.eachEntry(ctx, docURL, rd, func(e *manifest.Entry) error {
		if d.InRange != nil {
			ok, err := d.InRange(resourceSet, e.Metadata.From, e.Metadata.Until)
			if err != nil || !ok {
				return err
			}
		}
		return d.walk(ctx, e.Loc, resourceSet, depth+1)
	})
}

// eachEntry calls fn for every entry of rd. A malformed entry is recorded
// as a failure and skipped; a broken document ends the walk of that document
// with an error.
func (d *Planner) eachEntry(ctx context.Context, docURL string, rd *manifest.Reader, fn func(*manifest.Entry) error) error {
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
				d.Invalid(ctx, uri, fmt.Sprintf("%s: %v", docURL, err), false)
				continue
			}
			return errclass.About(docURL, err)
		}
		if err := CheckLoc(e.Loc); err != nil {
			d.Invalid(ctx, e.Loc, fmt.Sprintf("%s: %v", docURL, err), true)
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
	}
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
