// Package publish makes rsharvest a ResourceSync Source of what it holds:
// from the state store's snapshot of resources and
// its log of changes (or the documents the es sink writes), it writes a
// Source Description, a Capability List per source harvested (a resource
// set), each set's Resource List (an index with pages past MaxEntries
// entries or MaxBytes bytes a document) and Change Lists, one per period,
// under a Change List Index. Every list is written as a stream; the
// documents of a run form a generation, published at once (see Current),
// and a document whose bytes did not change is kept, not rewritten.
package publish

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/sink"
)

// Limits of one sitemap document (the sitemap protocol's).
const (
	DefaultMaxEntries = 50000
	DefaultMaxBytes   = 50 << 20
	// DefaultChangePeriod is the span of one Change List.
	DefaultChangePeriod = 24 * time.Hour
)

// WellKnown is the path of the Source Description (spec §8).
const WellKnown = ".well-known/resourcesync"

// FilesPath is where a held copy of a resource is served under its set's
// directory (sets/NAME/ under the base URL): FilesPath + "/" + the fs
// sink's path of its URI (fs.Encode). A set's directory says whose copy it
// is when two sources list the same URI.
const FilesPath = "files"

// Options says what to publish and where.
type Options struct {
	// Out is the output directory (see Current).
	Out string
	// BaseURL is the absolute http(s) URL the generation is served at.
	BaseURL string
	// ChangePeriod is the span of one Change List (DefaultChangePeriod
	// when zero).
	ChangePeriod time.Duration
	// MaxEntries and MaxBytes bound one document (the defaults when zero).
	MaxEntries int
	MaxBytes   int64
	// Copies republishes as an aggregator (see republished):
	// each entry's loc is the held copy, served under
	// BaseURL/sets/NAME/files/, and its via link the original.
	Copies bool
	// Bodies, when set, holds the bodies (an fs or s3 sink): each set
	// gets a Resource Dump of them, in packages of at most DumpSize body
	// bytes (DefaultDumpSize when zero).
	Bodies   sink.Inventory
	DumpSize int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives progress (discarded when nil).
	Log *slog.Logger
}

// Result is what a run published.
type Result struct {
	// Generation names the generation now published.
	Generation string
	// Written and Kept count the documents written anew and those kept
	// because their bytes did not change.
	Written, Kept int
	// Sets, Resources and Changes count what the documents list.
	Sets               int
	Resources, Changes int64
	// At is the time the published lists are current to.
	At time.Time
}

// ErrBadBaseURL is wrapped by Publish's error when the base URL is not an
// absolute http(s) URL.
var ErrBadBaseURL = errors.New("the base URL must be an absolute http(s) URL")

// CheckBaseURL returns base without a trailing slash, as a URI (see
// manifest.ToURI), or an error wrapping ErrBadBaseURL (permanent).
func CheckBaseURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", errclass.NewPermanent(fmt.Errorf("publish: base URL %q: %w", base, ErrBadBaseURL))
	}
	// As a URI: what a document joins it into must be one (a space or a
	// non-ASCII character percent-encoded).
	return manifest.ToURI(strings.TrimRight(base, "/")), nil
}

// Publish writes a new generation from h and publishes it. On any error the
// generation is removed and the published one stays as it was.
func Publish(ctx context.Context, h Holdings, o Options) (Result, error) {
	base, err := CheckBaseURL(o.BaseURL)
	if err != nil {
		return Result{}, err
	}
	o.BaseURL = base
	o.ChangePeriod = cmp.Or(o.ChangePeriod, DefaultChangePeriod)
	o.MaxEntries = cmp.Or(o.MaxEntries, DefaultMaxEntries)
	o.MaxBytes = cmp.Or(o.MaxBytes, DefaultMaxBytes)
	o.DumpSize = cmp.Or(o.DumpSize, DefaultDumpSize)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxBytes < 8<<10 || o.MaxEntries < 1 {
		return Result{}, errclass.Permanentf("publish: a document must hold at least one entry and 8 KiB")
	}
	g, err := openGeneration(o.Out)
	if err != nil {
		return Result{}, err
	}
	p := &publisher{o: o, g: g}
	err = h.View(ctx, func(v View) error { return p.publish(ctx, v) })
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		g.abort()
		return Result{}, err
	}
	if err := g.commit(); err != nil {
		g.abort()
		return Result{}, err
	}
	p.res.Generation, p.res.Written, p.res.Kept = g.name, g.written, g.kept
	return p.res, nil
}

type publisher struct {
	o   Options
	g   *generation
	res Result
	// at is the time the lists are current to; now the view's time;
	// newest the stamp of the newest change of the set being written (see
	// closed).
	at, now, newest time.Time
	// dir is the directory of the set being written (its copies are
	// linked under it).
	dir string
}

func (p *publisher) url(rel string) string { return p.o.BaseURL + "/" + rel }

func (p *publisher) publish(ctx context.Context, v View) error {
	p.now = p.o.Now().UTC()
	at, err := v.At(ctx)
	if err != nil {
		return err
	}
	p.at = at
	if p.at.IsZero() {
		p.at = p.now.Truncate(time.Second)
	}
	p.res.At = p.at
	srcs, err := v.Sources(ctx)
	if err != nil {
		return err
	}
	d, err := p.g.create(WellKnown)
	if err != nil {
		return err
	}
	defer d.discard()
	md := manifest.NewMetadata()
	md.Capability = manifest.Description
	w, err := manifest.NewWriter(d, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		return err
	}
	dirs, err := setDirs(ctx, v, srcs)
	if err != nil {
		return err
	}
	for _, src := range srcs {
		capURL, err := p.set(ctx, v, src, dirs[src])
		if err != nil {
			return err
		}
		e := manifest.Entry{Loc: capURL, Metadata: manifest.NewMetadata()}
		e.Metadata.Capability = manifest.CapabilityList
		described, err := v.DescribedBy(ctx, src)
		if err != nil {
			return err
		}
		if described != "" {
			e.Links = append(e.Links, manifest.NewLink("describedby", manifest.ToURI(described)))
		}
		if err := w.Write(&e); err != nil {
			return err
		}
		p.res.Sets++
		p.o.Log.Info("published a resource set", "source", src, "capability_list", capURL)
	}
	if err := w.Close(); err != nil {
		return err
	}
	return d.close()
}

// set writes a source's documents and returns its Capability List's URL.
func (p *publisher) set(ctx context.Context, v View, src, dir string) (string, error) {
	p.dir = dir
	capURL := p.url(dir + "/capabilitylist.xml")
	// The source's documents are current to its own newest change: on
	// PostgreSQL commits of different sources run at once, and only each
	// source's stamps increase in commit order (state.Snapshot.LastRecorded).
	cl, newest, err := p.changeLists(ctx, v, src, dir, capURL)
	if err != nil {
		return "", err
	}
	p.at = cmp.Or(newest, p.res.At)
	rl, err := p.resourceList(ctx, v, src, dir, capURL)
	if err != nil {
		return "", err
	}
	var rd, cd string
	if p.o.Bodies != nil {
		if rd, err = p.resourceDump(ctx, v, src, dir, capURL); err != nil {
			return "", err
		}
		if cd, err = p.changeDump(ctx, v, src, dir, capURL); err != nil {
			return "", err
		}
	}
	d, err := p.g.create(dir + "/capabilitylist.xml")
	if err != nil {
		return "", err
	}
	defer d.discard()
	md := manifest.NewMetadata()
	md.Capability = manifest.CapabilityList
	links := []manifest.Link{manifest.NewLink("up", p.url(WellKnown))}
	described, err := v.DescribedBy(ctx, src)
	if err != nil {
		return "", err
	}
	if described != "" {
		// The origin's own description, as the harvest discovered it.
		links = append(links, manifest.NewLink("describedby", manifest.ToURI(described)))
	}
	w, err := manifest.NewWriter(d, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: links})
	if err != nil {
		return "", err
	}
	for _, c := range []struct {
		loc string
		c   manifest.Capability
	}{{rd, manifest.ResourceDump}, {rl, manifest.ResourceList}, {cd, manifest.ChangeDump}, {cl, manifest.ChangeList}} {
		if c.loc == "" {
			continue
		}
		e := manifest.Entry{Loc: c.loc, Metadata: manifest.NewMetadata()}
		e.Metadata.Capability = c.c
		if err := w.Write(&e); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return capURL, d.close()
}

// slug names a source's directory: readable, and unique by a digest of the
// source.
// SetDirs names the directory of each source's resource set in what v
// holds, as Publish does (by source).
func SetDirs(ctx context.Context, v View) (map[string]string, error) {
	srcs, err := v.Sources(ctx)
	if err != nil {
		return nil, err
	}
	return setDirs(ctx, v, srcs)
}

// setDirs names the directory of each source's resource set: sets/ and the
// registry site that harvests it (its readable form), or, for a source no
// site harvests and for sources that claim the same site, a readable form
// of the source with a digest of it (slug).
func setDirs(ctx context.Context, v View, srcs []string) (map[string]string, error) {
	sites := map[string]string{}
	claims := map[string]int{}
	for _, src := range srcs {
		s, err := v.SiteOf(ctx, src)
		if err != nil {
			return nil, err
		}
		if s != "" {
			sites[src] = s
			claims[siteDir(s)]++
		}
	}
	dirs := map[string]string{}
	for _, src := range srcs {
		if s, ok := sites[src]; ok && claims[siteDir(s)] == 1 {
			dirs[src] = "sets/" + siteDir(s)
			continue
		}
		dirs[src] = "sets/" + slug(src)
	}
	return dirs, nil
}

// siteDir is a site's name as a directory: its lower-case letters,
// digits, "-", "_" and "." kept, any other character (and a leading ".")
// as "-". One that ends as a slug does ("-" and 8 hex digits) gets a "_"
// after, which no slug ends in, so a site's directory is never a source's.
func siteDir(name string) string {
	var b strings.Builder
	for i, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	d := b.String()
	if slugEnd.MatchString(d) {
		d += "_"
	}
	return d
}

// slugEnd is how every slug ends.
var slugEnd = regexp.MustCompile(`-[0-9a-f]{8}$`)

func slug(src string) string {
	s := src
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 48 {
			break
		}
	}
	sum := sha256.Sum256([]byte(src))
	return strings.TrimRight(b.String(), "-") + "-" + hex.EncodeToString(sum[:4])
}

// ParsePeriod reads a change period: a Go duration (12h, 90m) or a number
// of days or weeks (1d, 2w). It must be at least a second.
func ParsePeriod(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, unit, ok := cutUnit(s); ok {
		// At most ten years, so that the duration cannot overflow.
		if d = time.Duration(n) * unit; n < 1 || n > 3660*24*time.Hour.Nanoseconds()/unit.Nanoseconds() {
			err = fmt.Errorf("want 1 to 3660 days")
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err == nil && d < time.Second {
		err = fmt.Errorf("shorter than a second")
	}
	if err != nil {
		return 0, errclass.Permanentf("publish: change period %q: %w", s, err)
	}
	return d, nil
}

// cutUnit reads a whole number of days or weeks ("1d", "2w").
func cutUnit(s string) (int64, time.Duration, bool) {
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if len(s) < 2 || unit[s[len(s)-1]] == 0 {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || s[0] == '+' {
		return 0, 0, false
	}
	return n, unit[s[len(s)-1]], true
}
