// Package bench provides a deterministic synthetic ResourceSync Source for
// tests and benchmarks, and a loopback HTTP server for it.
//
// Generate writes a complete static Source to a directory: a Source
// Description, a Capability List, a Resource Dump (or a Resource Dump Index
// over several Resource Dumps), ZIP packages with their manifests and,
// optionally, a Resource List and the resources' bodies as plain files,
// and a Change Dump (or Change Dump Index) of changes after the snapshot.
// Everything is a function of the options alone: the same options give
// byte-identical files. Truth regenerates the same resources without disk;
// ChangesIn lists the changes and TruthAfter the resources after some of
// them.
//
// Serve and NewHandler serve such a directory (or any static Source, such as
// the resync interop sample) over HTTP, rewriting the placeholder base URL in
// documents to the server's own URL, and can publish a Change Dump package
// by package (Handler.Publish).
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
	// DefaultChangeInterval is the default interval one Change Dump
	// package covers.
	DefaultChangeInterval = time.Hour
	// DefaultCreateShare and DefaultDeleteShare are the default shares of
	// creations and deletions among the changes.
	DefaultCreateShare = 0.1
	DefaultDeleteShare = 0.05
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

	// ChangePackages is the number of Change Dump packages; 0 means no
	// Change Dump (and a Source exactly as without these options). The
	// changes happen after the Resource Dump's snapshot and are a function
	// of the options alone, like everything else.
	ChangePackages int
	// ChangesPerPackage is the number of changes in each Change Dump
	// package; 0 means max(1, Resources/20).
	ChangesPerPackage int
	// ChangeStart is the start of the first package's interval (and the
	// Change Dump's from); zero means At. It is rounded up to a whole
	// second.
	ChangeStart time.Time
	// ChangeInterval is the interval each package covers: package i
	// (1-based) covers [ChangeStart+(i-1)×ChangeInterval,
	// ChangeStart+i×ChangeInterval]. 0 means DefaultChangeInterval. It must
	// be a whole number of seconds, at least ChangesPerPackage seconds.
	ChangeInterval time.Duration
	// CreateShare and DeleteShare are the shares of changes that create a
	// new (or re-create a deleted) resource and that delete one; the rest
	// are updates. Each package holds share×ChangesPerPackage of each,
	// rounded up or down at random. 0 means DefaultCreateShare and
	// DefaultDeleteShare; a negative value means none. Their sum must be at
	// most 1.
	CreateShare, DeleteShare float64
	// ClosedLast closes the Change Dump: the last package and the Change
	// Dump (or its index) get an until. Off, they are open (no until).
	ClosedLast bool

	// Producer writes the packages as another producer would, so that
	// figures do not hang on this generator's choices: "" (or
	// ProducerRsharvest) as described in PackageFormat; ProducerPython1 and
	// ProducerPython6 as Python's zipfile writes to a file (every entry
	// deflated by zlib at level 1 or 6, sizes in the local headers,
	// manifest first); ProducerJava as Java's ZipOutputStream writes
	// (zlib level 6, a data descriptor after every entry, the manifest
	// last). The other producers' packages are rewritten by python3 with
	// bench/repack.py (zipfile and zlib themselves), which must be
	// installed.
	Producer string `json:",omitempty"`

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
	// ChangePackages is the number of Change Dump packages.
	ChangePackages int
	// Changes is the number of changes in them.
	Changes int
	// ChangeBytes is the sum of the Change Dump packages' lengths.
	ChangeBytes int64
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
	changeWidth  int   // width of the Change Dump packages' numbers
	slots        int64 // whole seconds in ChangeInterval
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
	// seed is the generation seed the body is drawn from: the options'
	// Seed for the baseline, a value derived from it and the version for
	// a changed resource.
	seed int64
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
	switch o.Producer {
	case "", ProducerRsharvest, ProducerPython1, ProducerPython6, ProducerJava:
	default:
		return nil, fmt.Errorf("bench: unknown Producer %q (want %s)", o.Producer, strings.Join(Producers(), ", "))
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
	if err := normalizeChanges(&o); err != nil {
		return nil, err
	}
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
		changeWidth:  max(5, len(strconv.Itoa(o.ChangePackages))),
		slots:        int64(o.ChangeInterval / time.Second),
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

	r := resource{index: i, text: kindDraw < p.compressible, seed: p.o.Seed}
	r.stored = p.stored(r.text, storedDraw)
	r.size = p.size(sizeDraw, uniformDraw)
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

// stored tells whether an entry of the given kind is stored rather than
// deflated, given a uniform draw.
func (p *plan) stored(text bool, draw float64) bool {
	if p.storedByKind {
		return !text
	}
	return draw < p.o.StoredShare
}

// size returns a body size from a standard normal and a uniform draw.
func (p *plan) size(normal, uniform float64) int64 {
	var size float64
	switch p.o.SizeDist {
	case Fixed:
		size = float64(p.o.MeanSize)
	case Uniform:
		size = math.Floor(uniform * float64(2*p.o.MeanSize+1))
	default:
		size = math.Round(math.Exp(p.mu + p.sigma*normal))
	}
	return int64(min(size, float64(p.o.MaxSize)))
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

// Truth calls fn with every resource of the Resource Dump that opts
// describe (the baseline, before any Change Dump package), in index order:
// its URI (as in the manifests' <loc>) and its body. The body is valid only
// during the call. Nothing is read from or written to disk;
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
