package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zip"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/state"
)

// DefaultDumpSize is the most body bytes one dump package holds.
const DefaultDumpSize = 1 << 30

// dumpPackage is one package written: what the Resource Dump says of it.
type dumpPackage struct {
	rel         string
	length      int64
	sum         []byte
	from, until time.Time // a change package's interval
}

// resourceDump writes a source's Resource Dump: ZIP packages of the held
// bodies (read from o.Bodies and checked against the state's fixity as
// they are copied), each with manifest.xml first, cut at o.DumpSize body
// bytes or MaxEntries entries, and the Resource Dump document listing each
// package with its length and hash. It returns the document's URL.
//
// Each package is built from two streams: the bodies are zipped into a
// scratch archive while the manifest is written to a scratch file; the
// package is then the manifest followed by the scratch archive's entries,
// copied as they are (zip.Writer.Copy). Memory holds one package's
// directory, never the dump.
func (p *publisher) resourceDump(ctx context.Context, v View, src, dir, capURL string) (string, error) {
	var pk packer
	defer pk.discard()
	err := v.Resources(ctx, src, func(r state.Resource) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := resourceMeta(&r)
		p.republished(&e, r.URI)
		doc := dumpEntryBound(&e, r.URI)
		if cur := pk.cur; cur == nil || cur.n == int64(p.o.MaxEntries) || (cur.n > 0 && (cur.bytes+max(r.Length, 0) > p.o.DumpSize ||
			cur.docBytes+doc > p.o.MaxBytes-headerReserve)) {
			if err := pk.end(ctx); err != nil {
				return err
			}
			// Named after the at they are current to, as Resource List
			// pages are: a consumer that read the Resource Dump never
			// gets another publication's package under a name it lists.
			rel := fmt.Sprintf("%s/resourcedump-%s-%05d.zip", dir, p.at.UTC().Format(stampName), len(pk.done)+1)
			md := manifest.NewMetadata()
			md.Capability, md.At, md.Completed = manifest.ResourceDumpManifest, p.at, p.at
			if err := pk.start(ctx, p, rel, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}}); err != nil {
				return err
			}
		}
		pk.cur.docBytes += doc
		return pk.cur.add(ctx, p, r.URI, &e)
	})
	if err == nil {
		err = pk.end(ctx)
	}
	if err != nil {
		return "", err
	}
	pkgs := pk.done
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = manifest.ResourceDump, p.at, p.at
	return p.dumpDocument(dir+"/resourcedump.xml", md, capURL, pkgs)
}

// dumpDocument writes a Resource or Change Dump document listing pkgs, and
// returns its URL.
func (p *publisher) dumpDocument(rel string, md manifest.Metadata, capURL string, pkgs []dumpPackage) (string, error) {
	if n := len(pkgs); n > p.o.MaxEntries || int64(n)*(512+2*int64(len(p.url(rel)))) > p.o.MaxBytes-headerReserve {
		return "", errclass.Permanentf("publish: %s would list %d packages, past a document's limits (%d entries, %d bytes): give a larger dump size",
			rel, n, p.o.MaxEntries, p.o.MaxBytes)
	}
	d, err := p.g.create(rel)
	if err != nil {
		return "", err
	}
	defer d.discard()
	w, err := manifest.NewWriter(d, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}})
	if err != nil {
		return "", err
	}
	for _, pk := range pkgs {
		e := manifest.Entry{Loc: p.url(pk.rel), Metadata: manifest.NewMetadata()}
		e.Metadata.Length, e.Metadata.Type = pk.length, "application/zip"
		e.Metadata.Hashes = fixity.Hashes{SHA256: pk.sum}
		if md.Capability == manifest.ResourceDump {
			e.Metadata.At, e.Metadata.Completed = p.at, p.at
		} else {
			e.Metadata.From, e.Metadata.Until = pk.from, pk.until
		}
		ml := manifest.NewLink("contents", p.url(manifestRel(pk.rel)))
		ml.Type = "application/xml"
		e.Links = append(e.Links, ml)
		if err := w.Write(&e); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return p.url(rel), d.close()
}

// changeDump writes a source's Change Dump: a package per period (more
// where one passes the dump size, MaxEntries or a manifest's MaxBytes),
// the current period's open (no until) and rewritten as it grows. A
// package holds the deletions of its period and the body of each change
// whose version is still the one held; a change a later one superseded
// has no body to give (only the newest version is held) and is left out —
// a consumer that applies the packages in order still ends with what
// rsharvest holds.
//
// A closed package never changes: the packages are cut over every change
// of the log, superseded or not, which only grows past a closed package's
// until, so its interval and name stay; and one the published generation
// already listed closed, with the same interval, is kept as it was
// published (see keepClosed), though a change it packs was superseded
// since.
func (p *publisher) changeDump(ctx context.Context, v View, src, dir, capURL string) (string, error) {
	period := p.o.ChangePeriod
	include := func(c *state.ChangeRecord) bool { return c.Change == state.ChangeDeleted || !c.Superseded }
	newPager := func() *pager {
		return &pager{max: int64(p.o.MaxEntries), budget: p.o.DumpSize, docBudget: p.o.MaxBytes - headerReserve}
	}
	pg := newPager()
	var last time.Time
	add := func(c state.ChangeRecord) error {
		per := c.Recorded.UTC().Truncate(period)
		e := changeMeta(&c)
		p.republished(&e, c.URI)
		pg.add(max(c.Length, 0), dumpEntryBound(&e, c.URI), per, c.Recorded, len(pg.pages) == 0 || !per.Equal(last))
		last = per
		return ctx.Err()
	}
	walk := func(fn func(state.ChangeRecord) error) error { return v.Changes(ctx, src, true, fn) }
	if err := walk(add); err != nil {
		return "", err
	}
	if cutoff, ok := recentCutoff(pg.pages, p.o.MaxEntries); ok {
		pg, walk = newPager(), since(walk, cutoff)
		if err := walk(add); err != nil {
			return "", err
		}
	}
	bounds := p.pageBounds(pg.pages)
	pkgs := make([]dumpPackage, len(pg.pages))
	for k := range pg.pages {
		name := p.pageName(dir+"/changedump", pg.pages, k)
		if bounds[k][1].IsZero() {
			// Open, it grows: named after its last change too, so that
			// a consumer never gets bytes other than those the Change
			// Dump it read lists under the name (publish serve keeps
			// serving the previous publication's).
			name += "-to-" + pg.pages[k].last.UTC().Format(stampName)
		}
		pkgs[k] = dumpPackage{rel: name + ".zip", from: bounds[k][0], until: bounds[k][1]}
	}
	kept := p.keepClosed(dir+"/changedump.xml", pkgs)
	var pk packer
	defer pk.discard()
	var built []int // the packages pk builds, in order
	open := func(k int) error {
		if kept[k] {
			return pk.end(ctx)
		}
		md := manifest.NewMetadata()
		md.Capability, md.From, md.Until = manifest.ChangeDumpManifest, bounds[k][0], bounds[k][1]
		built = append(built, k)
		return pk.start(ctx, p, pkgs[k].rel, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}})
	}
	cur := newCursor(pg)
	if err := walk(func(c state.ChangeRecord) error {
		if err := cur.next(open); err != nil {
			return err
		}
		if kept[cur.k] || !include(&c) {
			return ctx.Err()
		}
		e := changeMeta(&c)
		p.republished(&e, c.URI)
		if c.Change == state.ChangeDeleted {
			return pk.cur.addEntry(&e)
		}
		return pk.cur.add(ctx, p, c.URI, &e)
	}); err != nil {
		return "", err
	}
	if err := cur.end(open); err != nil {
		return "", err
	}
	if err := pk.end(ctx); err != nil {
		return "", err
	}
	for i, k := range built {
		pkgs[k].length, pkgs[k].sum = pk.done[i].length, pk.done[i].sum
	}
	md := manifest.NewMetadata()
	md.Capability = manifest.ChangeDump
	if len(bounds) > 0 {
		md.From = bounds[0][0]
	} else {
		md.From = p.now.Truncate(period)
	}
	return p.dumpDocument(dir+"/changedump.xml", md, capURL, pkgs)
}

// keepClosed keeps, from the published generation, each package of pkgs
// that is closed and that the generation's dump document at rel listed
// closed with the same interval: the package and its manifest are linked
// as they are, and its length and digest taken from what was published.
// It returns the packages kept, by index; none when the generation has no
// such document, or one it cannot read (every package is written again).
func (p *publisher) keepClosed(rel string, pkgs []dumpPackage) map[int]bool {
	kept := map[int]bool{}
	published := p.g.published(rel)
	if published == nil {
		return kept
	}
	defer published.Close()
	r, err := manifest.NewReader(published, manifest.Options{})
	if err != nil {
		return kept
	}
	was := map[string][2]time.Time{}
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		if !e.Metadata.Until.IsZero() {
			was[e.Loc] = [2]time.Time{e.Metadata.From, e.Metadata.Until}
		}
	}
	for k, pk := range pkgs {
		iv, ok := was[p.url(pk.rel)]
		if pk.until.IsZero() || !ok || !iv[0].Equal(pk.from) || !iv[1].Equal(pk.until) {
			continue
		}
		length, sum, ok := p.g.keep(pk.rel, manifestRel(pk.rel))
		if !ok {
			continue
		}
		pkgs[k].length, pkgs[k].sum = length, sum
		kept[k] = true
	}
	return kept
}

// manifestRel is the path of the manifest published beside the package at
// rel.
func manifestRel(rel string) string { return strings.TrimSuffix(rel, ".zip") + "-manifest.xml" }

// dumpEntryBound is an upper bound of the bytes a package's manifest
// writes for e, an entry of uri's body (its path included).
func dumpEntryBound(e *manifest.Entry, uri string) int64 {
	return entryBound(e) + 16 + escBound("/"+EntryName(uri))
}

// packer writes a dump's packages one after the other.
type packer struct {
	cur  *packageBuilder
	done []dumpPackage
}

// start ends the package being written, if any, and starts the next.
func (k *packer) start(ctx context.Context, p *publisher, rel string, h manifest.Header) error {
	if err := k.end(ctx); err != nil {
		return err
	}
	b, err := p.newPackage(rel, h)
	k.cur = b
	return err
}

// end writes the package being written, if any.
func (k *packer) end(ctx context.Context) error {
	if k.cur == nil {
		return nil
	}
	dp, err := k.cur.finish(ctx)
	k.cur = nil
	if err != nil {
		return err
	}
	k.done = append(k.done, dp)
	return nil
}

// discard removes the scratch files of a package left unfinished.
func (k *packer) discard() {
	if k.cur != nil {
		k.cur.discard()
	}
}

// packageBuilder builds one package (see resourceDump).
type packageBuilder struct {
	g        *generation
	rel      string
	scratch  string
	bodies   *os.File
	zw       *zip.Writer
	man      *os.File
	mw       *manifest.Writer
	n, bytes int64
	// docBytes bounds the manifest's bytes (see dumpEntryBound).
	docBytes int64
}

func (p *publisher) newPackage(rel string, h manifest.Header) (*packageBuilder, error) {
	scratch, err := os.MkdirTemp(p.g.dir, tmpMark+"package-")
	if err != nil {
		return nil, errclass.Fatalf("publish: %w", err)
	}
	b := &packageBuilder{g: p.g, rel: rel, scratch: scratch}
	if b.bodies, err = os.Create(filepath.Join(scratch, "bodies.zip")); err == nil {
		b.man, err = os.Create(filepath.Join(scratch, "manifest.xml"))
	}
	if err != nil {
		b.discard()
		return nil, errclass.Fatalf("publish: %w", err)
	}
	b.zw = zip.NewWriter(b.bodies)
	if b.mw, err = manifest.NewWriter(b.man, h); err != nil {
		b.discard()
		return nil, err
	}
	return b, nil
}

// add copies the held body of uri into the package, checked against e's
// length and hashes, and lists e in the manifest with its path.
func (b *packageBuilder) add(ctx context.Context, p *publisher, uri string, e *manifest.Entry) error {
	body, err := p.o.Bodies.Get(ctx, uri)
	if err != nil {
		return fmt.Errorf("publish: dump: the held copy of %s: %w", uri, err)
	}
	defer body.Close()
	path := "/" + EntryName(uri)
	fw, err := b.zw.CreateHeader(&zip.FileHeader{Name: path[1:], Method: zip.Deflate, Modified: e.Lastmod})
	if err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	md := &e.Metadata
	fr := fixity.NewReader(body, fixity.Expect{Length: md.Length, Hashes: md.Hashes}, fixity.Compute{SHA256: md.Hashes.IsZero()})
	n, err := io.Copy(fw, fr)
	if err != nil {
		if errors.Is(err, fixity.ErrMismatch) {
			return errclass.Fatalf("publish: dump: the held copy of %s does not match the state (run rsharvest audit): %w", uri, err)
		}
		return fmt.Errorf("publish: dump: %s: %w", uri, err)
	}
	md.Path, md.Length = path, n
	if md.Hashes.IsZero() {
		md.Hashes = fr.Sum()
	}
	b.n++
	b.bytes += n
	return b.mw.Write(e)
}

// addEntry lists e, which has no body (a deletion), in the manifest.
func (b *packageBuilder) addEntry(e *manifest.Entry) error {
	b.n++
	return b.mw.Write(e)
}

// finish writes the package: its manifest first, then the bodies; and the
// manifest once more beside it (the package's rel="contents").
func (b *packageBuilder) finish(ctx context.Context) (dumpPackage, error) {
	defer b.discard()
	if err := b.mw.Close(); err != nil {
		return dumpPackage{}, err
	}
	if err := b.zw.Close(); err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	d, err := b.g.create(b.rel)
	if err != nil {
		return dumpPackage{}, err
	}
	defer d.discard()
	zw := zip.NewWriter(d)
	mf, err := zw.CreateHeader(&zip.FileHeader{Name: "manifest.xml", Method: zip.Deflate})
	if err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	if _, err := b.man.Seek(0, io.SeekStart); err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	if _, err := io.Copy(mf, b.man); err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	zr, err := zip.OpenReader(b.bodies.Name())
	if err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if err := ctx.Err(); err != nil {
			return dumpPackage{}, err
		}
		if err := zw.Copy(f); err != nil {
			return dumpPackage{}, errclass.Fatalf("publish: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	dp := dumpPackage{rel: b.rel, length: d.n, sum: d.h.Sum(nil)}
	if err := d.close(); err != nil {
		return dumpPackage{}, err
	}
	// The manifest beside the package, for consumers that read it first.
	md, err := b.g.create(manifestRel(b.rel))
	if err != nil {
		return dumpPackage{}, err
	}
	defer md.discard()
	if _, err := b.man.Seek(0, io.SeekStart); err != nil {
		return dumpPackage{}, errclass.Fatalf("publish: %w", err)
	}
	if _, err := io.Copy(md, b.man); err != nil {
		return dumpPackage{}, err
	}
	return dp, md.close()
}

// discard removes the package's scratch files.
func (b *packageBuilder) discard() {
	for _, f := range []*os.File{b.bodies, b.man} {
		if f != nil {
			f.Close()
		}
	}
	_ = os.RemoveAll(b.scratch)
}
