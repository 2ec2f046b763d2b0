// Package manifest models and streams every ResourceSync document: Source
// Descriptions, Capability Lists, Resource and Change Lists, Resource and
// Change Dumps, their indexes, and the manifests inside dump packages.
//
// Every ResourceSync document is a sitemap (<urlset>) or a sitemap index
// (<sitemapindex>) extended with rs:md and rs:ln elements. A Reader yields
// the document's Header first and then its entries one at a time, so a
// document of millions of entries is read in constant memory. A Writer
// produces documents the same way.
package manifest

import (
	"time"

	"github.com/rsharvest/rsharvest/fixity"
)

// Namespaces of the sitemap protocol and of the ResourceSync terms.
const (
	SitemapNS = "http://www.sitemaps.org/schemas/sitemap/0.9"
	RSNS      = "http://www.openarchives.org/rs/terms/"
)

// Root tells a sitemap (<urlset>) from a sitemap index (<sitemapindex>).
type Root int

// The two document roots.
const (
	URLSet Root = iota + 1
	SitemapIndex
)

// String returns the root element's name.
func (r Root) String() string {
	switch r {
	case URLSet:
		return "urlset"
	case SitemapIndex:
		return "sitemapindex"
	}
	return "unknown"
}

// Capability is the value of an rs:md capability attribute.
type Capability string

// Capabilities defined by the specification.
const (
	Description          Capability = "description"
	CapabilityList       Capability = "capabilitylist"
	ResourceList         Capability = "resourcelist"
	ResourceDump         Capability = "resourcedump"
	ChangeList           Capability = "changelist"
	ChangeDump           Capability = "changedump"
	ResourceDumpManifest Capability = "resourcedump-manifest"
	ChangeDumpManifest   Capability = "changedump-manifest"
)

// Change is the value of an rs:md change attribute.
type Change string

// Change types defined by the specification.
const (
	Created Change = "created"
	Updated Change = "updated"
	Deleted Change = "deleted"
)

// Metadata is an rs:md element, at the document's root or in an entry. Every
// attribute of spec §7 is here, plus ResourceSync 1.1's datetime. Absent
// datetimes are the zero time; an absent length is -1.
type Metadata struct {
	Capability Capability
	At         time.Time
	Completed  time.Time
	From       time.Time
	Until      time.Time
	// Datetime is ResourceSync 1.1's time of the change an entry reports.
	Datetime time.Time
	Change   Change
	Encoding string
	Hashes   fixity.Hashes
	Length   int64
	// Path is the entry's path inside a dump package, as written (normally
	// with a leading slash).
	Path string
	Type string
}

// Link is an rs:ln element. An absent length is -1; an absent pri is 999999
// (the lowest priority), as the specification says.
type Link struct {
	Rel      string
	Href     string
	Type     string
	Encoding string
	Hashes   fixity.Hashes
	Length   int64
	Modified time.Time
	Path     string
	Pri      int
}

// DefaultPri is the priority of a link without a pri attribute.
const DefaultPri = 999999

// Header is what a document says about itself: its root element and the
// rs:md and rs:ln children of the root.
type Header struct {
	Root     Root
	Metadata Metadata
	Links    []Link
}

// IsIndex reports whether the document is an index (<sitemapindex>).
func (h *Header) IsIndex() bool { return h.Root == SitemapIndex }

// Link returns the first link with the given relation, if any.
func (h *Header) Link(rel string) (Link, bool) { return findLink(h.Links, rel) }

// Entry is one <url> (or <sitemap> in an index) of a document.
type Entry struct {
	Loc        string
	Lastmod    time.Time
	ChangeFreq string
	Metadata   Metadata
	Links      []Link
}

// Link returns the first link with the given relation, if any.
func (e *Entry) Link(rel string) (Link, bool) { return findLink(e.Links, rel) }

// ChangeTime returns the time of the change an entry reports: rs:md
// datetime when present (ResourceSync 1.1), otherwise <lastmod>. It is the
// zero time when neither is given.
func (e *Entry) ChangeTime() time.Time {
	if !e.Metadata.Datetime.IsZero() {
		return e.Metadata.Datetime
	}
	return e.Lastmod
}

func findLink(ls []Link, rel string) (Link, bool) {
	for _, l := range ls {
		if l.Rel == rel {
			return l, true
		}
	}
	return Link{}, false
}

// NewMetadata returns Metadata with every field absent (Length -1).
func NewMetadata() Metadata { return Metadata{Length: -1} }

// NewLink returns a Link with the given relation and target and every other
// field absent (Length -1, Pri DefaultPri).
func NewLink(rel, href string) Link { return Link{Rel: rel, Href: href, Length: -1, Pri: DefaultPri} }
