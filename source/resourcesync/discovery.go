// Package resourcesync is the ResourceSync protocol's planning side: its
// Planner walks from a source to the units of work of a run (the packages
// of Resource and Change Dumps, or their lists' entries), and Discover
// finds a ResourceSync Source's documents from any URL and maps them (spec
// §6): the Source Description, its Capability Lists (one
// per resource set) and each capability document they list.
//
// From a bare site URL it tries, in order, /.well-known/resourcesync, the
// Sitemap: lines of /robots.txt (keeping the ResourceSync documents among
// them), and the home page's <link rel="resourcesync"> and HTTP Link header.
// From any other URL it reads that document: a ResourceSync document is
// used as is, an HTML page or any response may point at one with
// rel="resourcesync". From what it found it follows rs:ln rel="up" links
// upwards to the Capability List and the Source Description, then reads the
// tree downwards, by the planner's own walk run as a survey (survey.go). Of
// the capability documents it reads only the header (and lists the child
// documents of an index): their entries can be huge.
//
// Every walk is bounded: Options.MaxDocuments documents in all,
// Options.MaxDepth levels, and a URL met again on the way up or down is
// reported in Source.Warnings and not followed again.
package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/manifest"
)

// Defaults of Options and fixed limits.
const (
	DefaultMaxDocuments = 1000
	DefaultMaxDepth     = 10
	// MaxPageBytes is how much of an HTML page or a robots.txt is read.
	MaxPageBytes = 1 << 20
	// maxLinkTargets bounds the rel="resourcesync" links followed from one
	// page or response.
	maxLinkTargets = 16
)

// How a Source was found (Source.Found).
const (
	FoundWellKnown  = "well-known"  // /.well-known/resourcesync of a bare site
	FoundRobots     = "robots.txt"  // a Sitemap: line of the site's robots.txt
	FoundHTMLLink   = "html-link"   // <link rel="resourcesync"> of an HTML page
	FoundLinkHeader = "link-header" // an HTTP Link header with rel="resourcesync"
	FoundUpLinks    = "up-links"    // rs:ln rel="up" from the given document to the Source Description
	FoundGiven      = "given"       // the given document is the top reached
)

// ErrNotFound is wrapped by the error Discover returns when no ResourceSync
// document can be found from the start URL. The error names the URLs tried
// and what was expected; it is retryable when a request failed temporarily,
// permanent otherwise.
var ErrNotFound = errors.New("no ResourceSync document found")

// Options bound and observe Discover. The zero value gives the defaults.
type Options struct {
	// MaxDocuments is the most documents fetched (robots.txt and pages
	// included) and the most entries taken from any one document. Zero (or
	// less) means DefaultMaxDocuments.
	MaxDocuments int
	// MaxDepth is the most up links followed and the deepest nesting of
	// documents read below the Source Description. Zero (or less) means
	// DefaultMaxDepth.
	MaxDepth int
	// MaxDocumentSize is the most bytes read of one document: a longer one
	// is not read further and fails, permanently, wrapping
	// fetch.ErrTooLarge. Zero means fetch.DefaultMaxDocumentSize;
	// negative means no cap.
	MaxDocumentSize int64
	// Logger receives a debug record per document read. Nil discards them.
	Logger *slog.Logger
}

// Source is what Discover found.
type Source struct {
	// Start is the URL discovery started from.
	Start string `json:"start"`
	// Description is the Source Description's URL, "" when none was found.
	Description string `json:"description"`
	// Found says how the source was found: one of the Found* constants.
	Found string `json:"found"`
	// Sets are the resource sets: those of the Source Description in its
	// order, then any reached otherwise.
	Sets []Set `json:"sets"`
	// Warnings are the problems met that did not stop discovery: loops,
	// links that lead nowhere or to the wrong kind of document, limits.
	Warnings []string `json:"warnings"`
}

// Set is one resource set: a Capability List and the capabilities it lists.
type Set struct {
	// Name is a short name, unique within the Source: the last path segment
	// of the Capability List's URL without extension, or when that is
	// ambiguous the one of its describedby link, its folder, its path.
	Name string `json:"name"`
	// CapabilityList is the Capability List's URL; "" when a capability
	// document was found without one.
	CapabilityList string `json:"capability_list"`
	// Capabilities are the documents the Capability List lists, in order.
	Capabilities []Capability `json:"capabilities"`
	// Err says why the Capability List could not be read, "" if it was.
	Err string `json:"error,omitempty"`
}

// Capability is one capability document: a Resource List, Resource Dump,
// Change List or Change Dump, or an index of one. Only its header is read.
type Capability struct {
	Kind manifest.Capability `json:"kind"`
	URL  string              `json:"url"`
	// Index is true for a <sitemapindex>.
	Index bool `json:"index"`
	// At, From and Until are the document's rs:md times, zero if absent
	// (taken from the listing entry when the document does not say).
	At    time.Time `json:"at,omitzero"`
	From  time.Time `json:"from,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Open is true for a Change List or Change Dump without until: it
	// still grows.
	Open bool `json:"open"`
	// Children are the documents an index lists, headers only.
	Children []Capability `json:"children,omitempty"`
	// Err says why the document could not be read or used, "" if it was.
	Err string `json:"error,omitempty"`
}

// Set returns the resource set with the given Name or Capability List URL;
// "" picks the only set of a source that has exactly one. The error lists
// the names available.
func (s *Source) Set(name string) (*Set, error) {
	if name == "" && len(s.Sets) == 1 {
		return &s.Sets[0], nil
	}
	for i := range s.Sets {
		if s.Sets[i].Name == name || (name != "" && s.Sets[i].CapabilityList == name) {
			return &s.Sets[i], nil
		}
	}
	if len(s.Sets) == 0 {
		return nil, errclass.Permanentf("no resource set %q: the source has none", name)
	}
	names := make([]string, len(s.Sets))
	for i := range s.Sets {
		names[i] = s.Sets[i].Name
	}
	return nil, errclass.Permanentf("no resource set %q: the source has %s", name, strings.Join(names, ", "))
}

// Find returns the set's first capability document of the given kind.
func (st *Set) Find(kind manifest.Capability) (*Capability, bool) {
	for i := range st.Capabilities {
		if st.Capabilities[i].Kind == kind {
			return &st.Capabilities[i], true
		}
	}
	return nil, false
}

// Discover finds the Source Description from start, a bare site URL or the
// URL of any document, and reads the tree of documents below it (see the
// package documentation). When no Source Description can be found above a
// Capability List or capability document, the Source has a set built from
// what was found.
//
// Discover fails only when nothing ResourceSync can be found from start:
// the error wraps ErrNotFound and names the URLs tried and what was
// expected. Documents of the tree that cannot be read are reported in their
// Err fields and in Source.Warnings. When ctx ends, Discover returns
// ctx.Err().
func Discover(ctx context.Context, client *fetch.Client, start string, opts Options) (*Source, error) {
	w, fs, err := find(ctx, client, start, opts)
	if err != nil {
		return nil, err
	}
	return w.build(ctx, start, fs)
}

// locate finds where a walk of the source at start begins: the Source
// Description that the documents found climb to; without one, the one
// Capability List they reach or, without one either, the one capability
// document. Unlike Discover it reads nothing below that document: the
// walk that follows reads the tree down once. how is one of the Found*
// constants.
func locate(ctx context.Context, client *fetch.Client, start string, opts Options) (top, how string, err error) {
	w, fs, err := find(ctx, client, start, opts)
	if err != nil {
		return "", "", err
	}
	how = fs[0].how
	var lists, docs []string
	for _, f := range fs {
		r := w.climb(ctx, f.d)
		if err := ctx.Err(); err != nil {
			return "", "", err
		}
		switch {
		case r.desc != nil:
			if how == FoundGiven && f.d != r.desc {
				how = FoundUpLinks
			}
			return r.desc.url, how, nil
		case r.caplist != nil && !slices.Contains(lists, r.caplist.url):
			lists = append(lists, r.caplist.url)
		case r.caplist == nil && r.capdoc != nil && !slices.Contains(docs, r.capdoc.url):
			docs = append(docs, r.capdoc.url)
		}
	}
	switch {
	case len(lists) == 1:
		return lists[0], how, nil
	case len(lists) == 0 && len(docs) == 1:
		return docs[0], how, nil
	}
	return "", "", errclass.Permanentf("%s: found %d capability lists and %d capability documents outside them, but no Source Description to sync them from",
		start, len(lists), len(docs))
}

// find looks for the ResourceSync documents discovery starts from (see
// Discover), with the finder that read them.
func find(ctx context.Context, client *fetch.Client, start string, opts Options) (*finder, []found, error) {
	if opts.MaxDocuments <= 0 {
		opts.MaxDocuments = DefaultMaxDocuments
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.MaxDocumentSize == 0 {
		opts.MaxDocumentSize = fetch.DefaultMaxDocumentSize
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(start)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, errclass.Permanentf("discover %q: not an absolute http(s) URL", start)
	}
	w := &finder{client: client, opts: opts, log: log, docs: make(map[string]*doc)}
	var fs []found
	if (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		fs, err = w.site(ctx, u)
	} else {
		u.Fragment, u.RawFragment = "", ""
		fs, err = w.given(ctx, u.String())
	}
	return w, fs, err
}

// expectedDoc says what a document discovery starts from should be.
const expectedDoc = `expected a ResourceSync Source Description, Capability List, Resource List, Resource Dump, Change List or Change Dump (or an index of one), ` +
	`or an HTML page or HTTP Link header pointing at one with rel="resourcesync"`

// expectedSite says what discovery looks for on a bare site.
const expectedSite = `expected a Source Description at /.well-known/resourcesync, a ResourceSync document in a robots.txt Sitemap: line, ` +
	`or a <link rel="resourcesync"> or HTTP Link header with rel="resourcesync" on the home page`

// notFound builds the error for nothing found: tried lists what each
// attempt met, each naming its URL (the start's among them, so the error
// does not name it again); the error is retryable when one of them failed
// temporarily.
func notFound(expected string, tried []string, retry bool) error {
	err := fmt.Errorf("%w: %s; %s", ErrNotFound, strings.Join(tried, "; "), expected)
	if retry {
		return errclass.NewRetryable(err)
	}
	return errclass.NewPermanent(err)
}
