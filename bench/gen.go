// Package bench provides a deterministic synthetic ResourceSync Source for
// tests and benchmarks, and a loopback HTTP server for it.
//
// Generate writes a complete static Source to a directory: a Source
// Description, a Capability List, a Resource Dump (or a Resource Dump Index
// over several Resource Dumps), ZIP packages with their manifests and,
// optionally, a Resource List and the resources' bodies as plain files.
// Everything is a function of the options alone: the same options give
// byte-identical files. Truth regenerates the same resources without disk.
//
// Serve and NewHandler serve such a directory (or any static Source, such as
// the resync interop sample) over HTTP, rewriting the placeholder base URL in
// documents to the server's own URL.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Defaults of GenOptions.
const (
	// Placeholder is the base URL the generated documents use by default and
	// the one the server rewrites to its own URL.
	Placeholder = "http://127.0.0.1:PORTX/"
	// DefaultMeanSize is the default mean body size in bytes.
	DefaultMeanSize = 50 << 10
	// DefaultPerPackage is how many resources a package holds when
	// GenOptions.Packages is zero.
	DefaultPerPackage = 5000
	// DefaultIndexThreshold is the default maximum number of packages in one
	// Resource Dump document.
	DefaultIndexThreshold = 100
	// DefaultListThreshold is the default maximum number of resources in one
	// Resource List document (the sitemap protocol's limit).
	DefaultListThreshold = 50000
	// maxEntrySize bounds MaxSize: stored entries are written with their
	// sizes in 32-bit local header fields.
	maxEntrySize = math.MaxUint32 - 1
)

// Size distributions of GenOptions.SizeDist.
const (
	LogNormal = "lognormal"
	Fixed     = "fixed"
	Uniform   = "uniform"
)

// DefaultAt is the snapshot time used when GenOptions.At is zero.
func DefaultAt() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// GenOptions describes a synthetic Source. The zero value of every field
// selects its documented default, so GenOptions{Dir: d, Resources: n} is a
// complete request.
type GenOptions struct {
	// Dir is the directory the Source is written to (created if needed).
	// Files of the layout are overwritten; other files are left alone, so
	// use an empty directory. Truth ignores it.
	Dir string
	// Resources is the number of resources (≥ 0).
	Resources int
	// Packages is the number of ZIP packages; 0 means
	// ceil(Resources/DefaultPerPackage). It is lowered to Resources when
	// larger. Resources are split into contiguous, nearly equal runs.
	Packages int
	// Seed selects the random streams; different seeds give different
	// sizes, kinds, dates and bodies.
	Seed int64
	// MeanSize is the mean body size in bytes; 0 means DefaultMeanSize.
	MeanSize int
	// SizeDist is LogNormal (the default, σ = 1), Fixed (every body
	// MeanSize bytes) or Uniform (0 to 2×MeanSize).
	SizeDist string
	// MaxSize caps body sizes; 0 means 64×MeanSize. At most 4 GiB − 2.
	MaxSize int
	// CompressibleShare is the share of bodies that are compressible text
	// (deflates ~3×); the rest are random bytes. 0 means 0.5; a negative
	// value means none.
	CompressibleShare float64
	// StoredShare is the share of ZIP entries stored (method 0) rather than
	// deflated. 0 or any negative value (such as -1) means the default:
	// random bodies stored, text bodies deflated.
	StoredShare float64
	// IndexThreshold is the maximum number of packages in one Resource Dump
	// document; with more packages resourcedump.xml is a Resource Dump
	// Index over resourcedump-0001.xml, …. 0 means DefaultIndexThreshold.
	IndexThreshold int
	// ListThreshold is the maximum number of resources in one Resource
	// List document (WriteResources only); with more, resourcelist.xml is a
	// Resource List Index over resourcelist-0001.xml, …. 0 means
	// DefaultListThreshold.
	ListThreshold int
	// Base is the URL prefix of every document, package and resource; empty
	// means Placeholder. A missing trailing slash is added.
	Base string
	// At is the snapshot time (rs:md at and completed everywhere); zero
	// means DefaultAt().
	At time.Time
	// NoOddNames leaves out the awkward URIs that are otherwise included:
	// a query string, raw spaces and non-ASCII, …/a next to …/a/b, a
	// segment over 255 bytes, and two names differing only in case.
	NoOddNames bool
	// WriteResources also writes every body under Dir/resources/ and a
	// Resource List. URIs that cannot be a file path (query string, the
	// over-long segment, …/a which is also a directory) get no file and are
	// left out of the Resource List.
	WriteResources bool
	// Logger receives progress at debug level and a summary at info
	// level; nil discards.
	Logger *slog.Logger
}

// GenResult summarises a generated Source.
type GenResult struct {
	// Resources is the number of resources in the dump.
	Resources int
	// Packages is the number of ZIP packages.
	Packages int
	// PayloadBytes is the sum of the bodies' lengths.
	PayloadBytes int64
	// PackageBytes is the sum of the ZIP files' lengths.
	PackageBytes int64
	// Listed is the number of resources in the Resource List (0 unless
	// WriteResources).
	Listed int
	// SourceDescription is the URL of the Source Description
	// (Base + ".well-known/resourcesync").
	SourceDescription string
}

// plan is a validated GenOptions with everything derived from it.
type plan struct {
	o            GenOptions
	words        *wordTable
	compressible float64
	storedByKind bool
	mu, sigma    float64
	nameWidth    int
	partWidth    int
	odd          []oddName
}

// oddName is an awkward URI given to one resource index.
type oddName struct {
	index int
	rel   string // below Base + "resources/"
	file  bool   // whether rel can be a file path
}

// resource is everything about one synthetic resource except its body.
type resource struct {
	index   int
	uri     string
	rel     string // path under resources/, "" when it cannot be a file
	zipPath string // path inside the package, without leading slash
	size    int64
	text    bool
	stored  bool
	typ     string
	lastmod time.Time
}

// Media types of the bodies.
const (
	textType   = "text/plain"
	binaryType = "application/octet-stream"
)

func newPlan(opts GenOptions) (*plan, error) {
	o := opts
	if o.Resources < 0 {
		return nil, fmt.Errorf("bench: Resources %d < 0", o.Resources)
	}
	if o.Packages < 0 {
		return nil, fmt.Errorf("bench: Packages %d < 0", o.Packages)
	}
	if o.Packages == 0 {
		o.Packages = (o.Resources + DefaultPerPackage - 1) / DefaultPerPackage
	}
	o.Packages = min(o.Packages, o.Resources)
	if o.MeanSize < 0 || o.MaxSize < 0 {
		return nil, fmt.Errorf("bench: MeanSize %d and MaxSize %d must not be negative", o.MeanSize, o.MaxSize)
	}
	if o.MeanSize == 0 {
		o.MeanSize = DefaultMeanSize
	}
	if o.MaxSize == 0 {
		o.MaxSize = min(64*o.MeanSize, maxEntrySize)
	}
	if o.MaxSize > maxEntrySize {
		return nil, fmt.Errorf("bench: MaxSize %d over %d", o.MaxSize, maxEntrySize)
	}
	switch o.SizeDist {
	case "":
		o.SizeDist = LogNormal
	case LogNormal, Fixed, Uniform:
	default:
		return nil, fmt.Errorf("bench: unknown SizeDist %q (want %s, %s or %s)", o.SizeDist, LogNormal, Fixed, Uniform)
	}
	if o.CompressibleShare > 1 || o.StoredShare > 1 || math.IsNaN(o.CompressibleShare) || math.IsNaN(o.StoredShare) {
		return nil, fmt.Errorf("bench: shares must be at most 1 (CompressibleShare %v, StoredShare %v)", o.CompressibleShare, o.StoredShare)
	}
	if o.IndexThreshold < 0 || o.ListThreshold < 0 {
		return nil, errors.New("bench: thresholds must not be negative")
	}
	if o.IndexThreshold == 0 {
		o.IndexThreshold = DefaultIndexThreshold
	}
	if o.ListThreshold == 0 {
		o.ListThreshold = DefaultListThreshold
	}
	if o.Base == "" {
		o.Base = Placeholder
	}
	if !strings.HasSuffix(o.Base, "/") {
		o.Base += "/"
	}
	if o.At.IsZero() {
		o.At = DefaultAt()
	}
	o.At = o.At.UTC()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}

	p := &plan{
		o:            o,
		words:        newWordTable(),
		compressible: o.CompressibleShare,
		storedByKind: o.StoredShare <= 0,
		sigma:        1,
		nameWidth:    max(6, len(strconv.Itoa(max(o.Resources-1, 0)))),
		partWidth:    max(5, len(strconv.Itoa(o.Packages))),
	}
	switch {
	case o.CompressibleShare == 0:
		p.compressible = 0.5
	case o.CompressibleShare < 0:
		p.compressible = 0
	}
	p.mu = math.Log(float64(o.MeanSize)) - p.sigma*p.sigma/2
	if !o.NoOddNames {
		p.odd = placeOddNames(o.Resources)
	}
	return p, nil
}

// oddNames are the awkward URIs, relative to Base + "resources/".
func oddNames() []oddName {
	return []oddName{
		{rel: "odd/search?id=42&lang=en"},
		{rel: "odd/sub dir/café über.txt", file: true},
		{rel: "odd/nest/a"},
		{rel: "odd/nest/a/b", file: true},
		{rel: "odd/long/" + strings.Repeat("l", 300) + ".txt"},
		{rel: "odd/Case.txt", file: true},
		{rel: "odd/case.txt", file: true},
	}
}

// placeOddNames spreads the odd names over n resources (the first ones when
// there are fewer resources than names).
func placeOddNames(n int) []oddName {
	names := oddNames()
	var placed []oddName
	for k, on := range names {
		switch {
		case n >= len(names):
			on.index = k * n / len(names)
		case k < n:
			on.index = k
		default:
			continue
		}
		placed = append(placed, on)
	}
	return placed
}

// resource derives resource i. It draws from a random stream of its own,
// always in the same order, so that one option does not shift another.
func (p *plan) resource(i int) resource {
	rng := rand.New(rand.NewPCG(seedMix(p.o.Seed, i, 1), seedMix(p.o.Seed, i, 2)))
	kindDraw := rng.Float64()
	storedDraw := rng.Float64()
	sizeDraw := rng.NormFloat64()
	uniformDraw := rng.Float64()
	ageSeconds := 1 + rng.IntN(30*24*3600)

	r := resource{index: i, text: kindDraw < p.compressible}
	if p.storedByKind {
		r.stored = !r.text
	} else {
		r.stored = storedDraw < p.o.StoredShare
	}
	var size float64
	switch p.o.SizeDist {
	case Fixed:
		size = float64(p.o.MeanSize)
	case Uniform:
		size = math.Floor(uniformDraw * float64(2*p.o.MeanSize+1))
	default:
		size = math.Round(math.Exp(p.mu + p.sigma*sizeDraw))
	}
	r.size = int64(min(size, float64(p.o.MaxSize)))
	r.typ, r.rel = binaryType, fmt.Sprintf("r%0*d.bin", p.nameWidth, i)
	if r.text {
		r.typ, r.rel = textType, fmt.Sprintf("r%0*d.txt", p.nameWidth, i)
	}
	r.zipPath = "res/" + r.rel
	r.uri = p.o.Base + "resources/" + r.rel
	for _, on := range p.odd {
		if on.index == i {
			r.uri = p.o.Base + "resources/" + on.rel
			r.rel = ""
			if on.file {
				r.rel = on.rel
			}
		}
	}
	r.lastmod = p.o.At.Add(-time.Duration(ageSeconds) * time.Second)
	return r
}

// packageRange returns the resource indexes [lo, hi) of package k.
func (p *plan) packageRange(k int) (lo, hi int) {
	n, np := p.o.Resources, p.o.Packages
	return k * n / np, (k + 1) * n / np
}

// partName names package k ("part-00001").
func (p *plan) partName(k int) string { return fmt.Sprintf("part-%0*d", p.partWidth, k+1) }

// listed reports how many resources can be files (and so are listed).
func (p *plan) listed() int {
	n := p.o.Resources
	for _, on := range p.odd {
		if !on.file {
			n--
		}
	}
	return n
}

// url returns the absolute URL of a path relative to the Source's base.
func (p *plan) url(rel string) string { return p.o.Base + rel }

// Truth calls fn with every resource of the Source that opts describe, in
// index order: its URI (as in the manifests' <loc>) and its body. The body
// is valid only during the call. Nothing is read from or written to disk;
// opts.Dir is ignored. An error from fn stops the walk and is returned.
func Truth(ctx context.Context, opts GenOptions, fn func(uri string, body io.Reader) error) error {
	p, err := newPlan(opts)
	if err != nil {
		return err
	}
	br := newBodyReader(p.words)
	for i := range p.o.Resources {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := p.resource(i)
		br.reset(p.o.Seed, i, r.size, r.text)
		if err := fn(r.uri, br); err != nil {
			return fmt.Errorf("bench: truth for %s: %w", r.uri, err)
		}
	}
	return nil
}
