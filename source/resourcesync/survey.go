package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/source"
)

// entries is a ResourceSync document being read by a walk: its header,
// then its entries one at a time until io.EOF. A *manifest.Reader is one;
// so is a document Discover has read already (docEntries).
type entries interface {
	Header() manifest.Header
	Next() (*manifest.Entry, error)
}

var (
	_ entries = (*manifest.Reader)(nil)
	_ entries = (*docEntries)(nil)
)

// survey is what a walk mapping a resource set for Discover keeps: the
// capability documents met, as a tree. The walk is the planner's own
// (walk.walk, walk.child): a survey only changes what it does with each
// document — every capability of the Capability List is followed, of a
// capability document only the header is read (and an index's children
// followed), and what cannot be read is that document's Err, not the
// walk's end.
type survey struct {
	w *finder
	// path holds the document being read and those above it, up to the
	// capability documents the set lists; roots are the latter, done.
	path  []*Capability
	roots []Capability
	// mapped are the documents mapped already: one listed again (by two
	// indexes that share it) is not mapped again, so the map grows with
	// the documents, not with the paths to them.
	mapped map[string]bool
}

// set maps one resource set: its Capability List and each capability
// document it lists, plus the documents found without one.
func (w *finder) set(ctx context.Context, desc *doc, p *setPlan) Set {
	st := Set{CapabilityList: p.url}
	sv := &survey{w: w}
	sw := &walk{Planner: &Planner{Log: w.log}, task: source.Task{Mode: source.Baseline},
		out: func(context.Context, source.Unit) error { return nil }, sets: map[string]*source.Checkpoint{},
		open: w.open, maxDepth: w.opts.MaxDepth, survey: sv}
	// Capability documents lie at depth 1, below their Capability List
	// (depth 0) and the Source Description above it.
	var at *trail
	if desc != nil {
		at = &trail{url: desc.url, depth: -1}
	}
	at = &trail{url: p.url, up: at}
	if p.url != "" {
		d := w.load(ctx, p.url)
		switch {
		case d.header == nil:
			st.Err = d.what()
		case d.capability() != manifest.CapabilityList:
			st.Err = fmt.Sprintf("%s is %s, expected a capabilitylist", d.url, d.what())
		default:
			if l, ok := d.header.Link("describedby"); ok && p.describedby == "" {
				p.describedby = l.Href
			}
			if err := sw.walk(ctx, p.url, p.url, at); err != nil && ctx.Err() == nil {
				w.warnf("%s: %v", p.url, err)
			}
		}
	}
	for _, o := range p.orphans {
		if ctx.Err() != nil {
			break
		}
		sw.child(ctx, at, &manifest.Entry{Loc: o.url, Metadata: manifest.NewMetadata()}, p.url)
	}
	st.Capabilities = sv.roots
	return st
}

// child maps the capability document entry e names, listed by the
// document at the end of here: next and downErr are what here.down said
// of it, walk reads it. It returns nil: what goes wrong is the document's
// Err, with a warning.
func (s *survey) child(here *trail, e *manifest.Entry, next *trail, downErr error, walk func() error) error {
	md := e.Metadata
	var parent *Capability
	if n := len(s.path); n > 0 {
		parent = s.path[n-1]
		if md.Capability == "" {
			md.Capability = parent.Kind
		}
	}
	c := Capability{Kind: md.Capability, URL: e.Loc, At: md.At, From: md.From, Until: md.Until}
	switch {
	case errors.Is(downErr, errLinkLoop):
		c.Err = downErr.Error()
		s.w.warnf("link loop: %s lists %s, which is above it; not followed again", here.url, e.Loc)
	case downErr != nil:
		c.Err = downErr.Error()
		s.w.warnf("%s: %s", e.Loc, c.Err)
	case s.mapped[e.Loc]:
		c.Err = "listed again; mapped once, where first listed"
		s.w.warnf("%s lists %s, mapped already; not mapped again", here.url, e.Loc)
	default:
		if s.mapped == nil {
			s.mapped = map[string]bool{}
		}
		s.mapped[e.Loc] = true
		s.path = append(s.path, &c)
		err := walk()
		s.path = s.path[:len(s.path)-1]
		if err != nil && c.Err == "" {
			c.Err = err.Error()
		}
	}
	if parent == nil {
		s.roots = append(s.roots, c)
		return nil
	}
	if c.Err == "" && c.Kind != parent.Kind {
		s.w.warnf("%s, an index of %s, lists %s, a %s", here.url, parent.Kind, e.Loc, c.Kind)
	}
	parent.Children = append(parent.Children, c)
	return nil
}

// surveyed maps the capability document rd (at the end of here) into the
// survey's current node: its header, and an index's children.
func (w *walk) surveyed(ctx context.Context, rd entries, here *trail) error {
	h := rd.Header()
	c := w.survey.path[len(w.survey.path)-1]
	what := (&doc{header: &h}).what()
	if level(h.Metadata.Capability) != 1 {
		return errors.New(what + ", expected a resourcelist, resourcedump, changelist or changedump document or index")
	}
	if c.Kind != "" && c.Kind != h.Metadata.Capability {
		w.survey.w.warnf("%s lists %s as a %s, but it is %s", here.up.url, here.url, c.Kind, what)
	}
	c.Kind, c.Index = h.Metadata.Capability, h.IsIndex()
	if t := h.Metadata.At; !t.IsZero() {
		c.At = t
	}
	if t := h.Metadata.From; !t.IsZero() {
		c.From = t
	}
	if t := h.Metadata.Until; !t.IsZero() {
		c.Until = t
	}
	c.Open = isChange(c.Kind) && c.Until.IsZero()
	if !c.Index {
		return nil
	}
	return w.walkIndex(ctx, rd, here.url, here)
}

// open reads document u for a survey: as the finder read it, once
// however often it is listed (see docEntries).
func (w *finder) open(ctx context.Context, u string) (entries, func(), error) {
	d := w.load(ctx, u)
	switch {
	case d.err != nil:
		return nil, nil, d.err
	case d.header == nil:
		return nil, nil, errclass.NewPermanent(errors.New(d.what()))
	}
	return &docEntries{w: w, d: d, seen: map[string]bool{}}, func() {}, nil
}

// docEntries serves a document Discover has read: its entries (at most
// Options.MaxDocuments), each <loc> resolved against the document, an
// unusable one or one listed twice skipped with a warning.
type docEntries struct {
	w    *finder
	d    *doc
	i    int
	seen map[string]bool
}

func (r *docEntries) Header() manifest.Header { return *r.d.header }

func (r *docEntries) Next() (*manifest.Entry, error) {
	for r.i < len(r.d.entries) {
		e := r.d.entries[r.i]
		r.i++
		u, ok := r.w.resolveLoc(r.d, e.Loc)
		if !ok {
			continue
		}
		if r.seen[u] {
			r.w.warnf("%s lists %s twice", r.d.url, u)
			continue
		}
		r.seen[u] = true
		resolved := *e
		resolved.Loc = u
		return &resolved, nil
	}
	return nil, io.EOF
}
