package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zip"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// DefaultDumpSize is the most body bytes one dump package holds.
const DefaultDumpSize = 1 << 30

// dumpPackage is one package written: what the Resource Dump says of it.
type dumpPackage struct {
	rel    string
	length int64
	sum    []byte
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
	var pkgs []dumpPackage
	var cur *packageBuilder
	defer func() {
		if cur != nil {
			cur.discard()
		}
	}()
	finish := func() error {
		if cur == nil {
			return nil
		}
		dp, err := cur.finish(ctx)
		cur = nil
		if err != nil {
			return err
		}
		pkgs = append(pkgs, dp)
		return nil
	}
	err := v.Resources(ctx, src, func(r state.Resource) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cur != nil && (cur.n == int64(p.o.MaxEntries) || (cur.bytes > 0 && cur.bytes+max(r.Length, 0) > p.o.DumpSize)) {
			if err := finish(); err != nil {
				return err
			}
		}
		if cur == nil {
			var err error
			rel := fmt.Sprintf("%s/resourcedump-%05d.zip", dir, len(pkgs)+1)
			if cur, err = p.newPackage(rel, capURL); err != nil {
				return err
			}
		}
		return cur.add(ctx, p, &r)
	})
	if err == nil {
		err = finish()
	}
	if err != nil {
		return "", err
	}
	d, err := p.g.create(dir + "/resourcedump.xml")
	if err != nil {
		return "", err
	}
	defer d.discard()
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = manifest.ResourceDump, p.at, p.at
	w, err := manifest.NewWriter(d, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}})
	if err != nil {
		return "", err
	}
	for _, pk := range pkgs {
		e := manifest.Entry{Loc: p.url(pk.rel), Metadata: manifest.NewMetadata()}
		e.Metadata.Length, e.Metadata.Type = pk.length, "application/zip"
		e.Metadata.Hashes = fixity.Hashes{SHA256: pk.sum}
		e.Metadata.At, e.Metadata.Completed = p.at, p.at
		ml := manifest.NewLink("contents", p.url(pk.rel[:len(pk.rel)-len(".zip")]+"-manifest.xml"))
		ml.Type = "application/xml"
		e.Links = append(e.Links, ml)
		if err := w.Write(&e); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return p.url(dir + "/resourcedump.xml"), d.close()
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
}

func (p *publisher) newPackage(rel, capURL string) (*packageBuilder, error) {
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
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = manifest.ResourceDumpManifest, p.at, p.at
	if b.mw, err = manifest.NewWriter(b.man, manifest.Header{Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{manifest.NewLink("up", capURL)}}); err != nil {
		b.discard()
		return nil, err
	}
	return b, nil
}

// add copies r's held body into the package, checked against r's length
// and hashes, and lists it in the manifest.
func (b *packageBuilder) add(ctx context.Context, p *publisher, r *state.Resource) error {
	body, err := p.o.Bodies.Get(ctx, r.URI)
	if err != nil {
		return fmt.Errorf("publish: dump: the held copy of %s: %w", r.URI, err)
	}
	defer body.Close()
	path := "/" + fs.Encode(r.URI)
	fw, err := b.zw.CreateHeader(&zip.FileHeader{Name: path[1:], Method: zip.Deflate, Modified: r.Lastmod})
	if err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	fr := fixity.NewReader(body, fixity.Expect{Length: r.Length, Hashes: r.Hashes}, fixity.Compute{SHA256: r.Hashes.IsZero()})
	n, err := io.Copy(fw, fr)
	if err != nil {
		if errors.Is(err, fixity.ErrMismatch) {
			return errclass.Fatalf("publish: dump: the held copy of %s does not match the state (run rsharvest audit): %w", r.URI, err)
		}
		return fmt.Errorf("publish: dump: %s: %w", r.URI, err)
	}
	e := p.resourceEntry(r)
	e.Links = nil
	e.Metadata.Path, e.Metadata.Length = path, n
	if e.Metadata.Hashes.IsZero() {
		e.Metadata.Hashes = fr.Sum()
	}
	b.n++
	b.bytes += n
	return b.mw.Write(&e)
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
	md, err := b.g.create(b.rel[:len(b.rel)-len(".zip")] + "-manifest.xml")
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
