package bench

import (
	"bufio"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
)

// Generate writes the Source that opts describe under opts.Dir:
//
//	.well-known/resourcesync              Source Description (one Capability List)
//	capabilitylist.xml                    resourcedump (and resourcelist with WriteResources)
//	resourcedump.xml                      Resource Dump, or past IndexThreshold packages a
//	resourcedump-0001.xml, …              Resource Dump Index over these Resource Dumps
//	packages/part-00001.zip, …            manifest.xml first, then res/r000000.txt, …
//	packages/part-00001.manifest.xml, …   the packages' manifests, byte for byte
//	resourcelist.xml (-0001.xml, …)       WriteResources only: Resource List (or Index)
//	resources/r000000.txt, …              WriteResources only: the bodies
//	changedump.xml                        ChangePackages only: Change Dump, or past
//	changedump-0001.xml, …                IndexThreshold packages a Change Dump Index
//	changes/change-00001.zip, …           manifest.xml first, then changes/r000123-v2.txt, …
//	changes/change-00001.manifest.xml, …  the Change Dump Manifests, byte for byte
//	.steps/                               the Change Dump documents of each publication
//	                                      step (see Handler.Publish), never served
//
// Every URL starts with opts.Base. Packages are written concurrently (one
// per CPU), each in two streaming passes, so memory does not grow with the
// dump. The documents are written last: a failed or cancelled generation
// leaves no Source Description behind (when Dir held none before).
//
// Change Dump package i covers [ChangeStart+(i-1)×ChangeInterval,
// ChangeStart+i×ChangeInterval]. Its changes are at whole seconds, strictly
// increasing, the first exactly at the package's from and the last before
// its until (so before the next package's first change); <lastmod> and
// rs:md datetime are the change's time. Every package mixes creations,
// updates and deletions (see CreateShare and DeleteShare): resources change
// several times within a package, baseline resources are updated, and
// every package after the first, as far as the earlier ones allow,
// re-creates a resource deleted earlier, deletes one updated earlier and
// updates one created earlier. Nothing changes a resource that does not
// exist or creates one that does. The Change Dump lists each package with
// its from and until (none for the last one unless ClosedLast), lastmod
// (its last change), type, length, md5 and sha-256, and a contents link to
// its manifest copy. ChangesIn lists the changes, TruthAfter the resources
// after any number of packages.
func Generate(ctx context.Context, opts GenOptions) (GenResult, error) {
	if opts.Dir == "" {
		return GenResult{}, errors.New("bench: GenOptions.Dir is empty")
	}
	p, err := newPlan(opts)
	if err != nil {
		return GenResult{}, err
	}
	start := time.Now()
	dirs := []string{"packages", ".well-known"}
	if p.o.WriteResources {
		dirs = append(dirs, "resources")
	}
	if p.o.ChangePackages > 0 {
		// Variants of an earlier generation would be served as this one's.
		if err := os.RemoveAll(filepath.Join(p.o.Dir, stepsDir)); err != nil {
			return GenResult{}, fmt.Errorf("bench: %w", err)
		}
		dirs = append(dirs, "changes", stepsDir)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(p.o.Dir, d), 0o755); err != nil {
			return GenResult{}, fmt.Errorf("bench: %w", err)
		}
	}
	var side *os.File
	if p.o.WriteResources {
		side, err = os.CreateTemp(p.o.Dir, ".bench-digests-*")
		if err != nil {
			return GenResult{}, fmt.Errorf("bench: %w", err)
		}
		defer func() {
			side.Close()
			os.Remove(side.Name())
		}()
	}

	pkgs := make([]pkgInfo, p.o.Packages)
	g, gctx := errgroup.WithContext(ctx)
	workers := runtime.GOMAXPROCS(0)
	packers := make(chan *packer, workers)
	for range workers {
		packers <- newPacker(p, side)
	}
	g.SetLimit(workers)
	for k := range p.o.Packages {
		g.Go(func() error {
			pk := <-packers // never blocks: at most workers goroutines run
			defer func() { packers <- pk }()
			info, err := pk.writePackage(gctx, p.resourceDumpSpec(k))
			pkgs[k] = info
			return err
		})
	}
	changes := p.writeChangePackages(gctx, g, packers)
	if err := g.Wait(); err != nil {
		return GenResult{}, err
	}

	res := GenResult{
		Resources:         p.o.Resources,
		Packages:          p.o.Packages,
		SourceDescription: p.url(".well-known/resourcesync"),
	}
	for _, pi := range pkgs {
		res.PayloadBytes += pi.payload
		res.PackageBytes += pi.length
	}
	if err := p.writeDumps(ctx, pkgs); err != nil {
		return GenResult{}, err
	}
	if p.o.ChangePackages > 0 {
		res.ChangePackages = p.o.ChangePackages
		res.Changes = p.o.ChangePackages * p.o.ChangesPerPackage
		for _, ci := range changes {
			res.ChangeBytes += ci.length
		}
		if err := p.writeChangeDumps(ctx, changes); err != nil {
			return GenResult{}, err
		}
	}
	if p.o.WriteResources {
		if res.Listed, err = p.writeResourceList(ctx, side); err != nil {
			return GenResult{}, err
		}
	}
	if err := p.writeCapabilityList(); err != nil {
		return GenResult{}, err
	}
	if err := p.writeSourceDescription(); err != nil {
		return GenResult{}, err
	}
	p.o.Logger.InfoContext(ctx, "bench: source generated", "dir", p.o.Dir,
		"resources", res.Resources, "packages", res.Packages,
		"payload_bytes", res.PayloadBytes, "package_bytes", res.PackageBytes,
		"change_packages", res.ChangePackages, "changes", res.Changes, "change_bytes", res.ChangeBytes,
		"elapsed", time.Since(start))
	return res, nil
}

// writeDoc writes one document to rel under Dir: the header, then the
// entries that body writes.
func (p *plan) writeDoc(rel string, h manifest.Header, body func(w *manifest.Writer) error) (err error) {
	path := filepath.Join(p.o.Dir, filepath.FromSlash(rel))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("bench: %s: %w", rel, cerr)
		}
	}()
	w, err := manifest.NewWriter(f, h)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", rel, err)
	}
	if err := body(w); err != nil {
		return fmt.Errorf("bench: %s: %w", rel, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("bench: %s: %w", rel, err)
	}
	return nil
}

// snapshot returns root metadata of the given capability with at and
// completed set to the snapshot time.
func (p *plan) snapshot(c manifest.Capability) manifest.Metadata {
	md := manifest.NewMetadata()
	md.Capability, md.At, md.Completed = c, p.o.At, p.o.At
	return md
}

// timesOnly returns entry metadata with at and completed only, as index
// entries carry.
func (p *plan) timesOnly() manifest.Metadata {
	md := manifest.NewMetadata()
	md.At, md.Completed = p.o.At, p.o.At
	return md
}

// docName names the n-th (1-based) document of a split capability
// ("resourcedump-0001.xml").
func docName(prefix string, n, total int) string {
	width := max(4, len(strconv.Itoa(total)))
	return fmt.Sprintf("%s-%0*d.xml", prefix, width, n)
}

// writeDumps writes resourcedump.xml: one Resource Dump, or a Resource Dump
// Index over Resource Dumps of at most IndexThreshold packages each.
func (p *plan) writeDumps(ctx context.Context, pkgs []pkgInfo) error {
	up := manifest.NewLink("up", p.url("capabilitylist.xml"))
	per := p.o.IndexThreshold
	if len(pkgs) <= per {
		return p.writeDump(ctx, "resourcedump.xml", 0, pkgs, []manifest.Link{up})
	}
	docs := (len(pkgs) + per - 1) / per
	index := manifest.NewLink("index", p.url("resourcedump.xml"))
	for d := range docs {
		lo, hi := d*per, min((d+1)*per, len(pkgs))
		if err := p.writeDump(ctx, docName("resourcedump", d+1, docs), lo, pkgs[lo:hi], []manifest.Link{up, index}); err != nil {
			return err
		}
	}
	return p.writeDoc("resourcedump.xml", manifest.Header{
		Root: manifest.SitemapIndex, Metadata: p.snapshot(manifest.ResourceDump), Links: []manifest.Link{up},
	}, func(w *manifest.Writer) error {
		for d := range docs {
			if err := w.Write(&manifest.Entry{Loc: p.url(docName("resourcedump", d+1, docs)), Metadata: p.timesOnly()}); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeDump writes one Resource Dump listing pkgs, the first of which is
// package number first (0-based).
func (p *plan) writeDump(ctx context.Context, rel string, first int, pkgs []pkgInfo, links []manifest.Link) error {
	return p.writeDoc(rel, manifest.Header{
		Root: manifest.URLSet, Metadata: p.snapshot(manifest.ResourceDump), Links: links,
	}, func(w *manifest.Writer) error {
		for j, pi := range pkgs {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := p.partName(first + j)
			md := p.timesOnly()
			md.Type, md.Length, md.Hashes = "application/zip", pi.length, pi.hashes
			contents := manifest.NewLink("contents", p.url("packages/"+name+".manifest.xml"))
			contents.Type = "application/xml"
			e := manifest.Entry{Loc: p.url("packages/" + name + ".zip"), Lastmod: p.o.At, Metadata: md, Links: []manifest.Link{contents}}
			if err := w.Write(&e); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeResourceList writes resourcelist.xml from the side file of digests:
// one Resource List, or a Resource List Index over Resource Lists of at
// most ListThreshold resources each. Resources without a file are left
// out. It returns the number of resources listed.
func (p *plan) writeResourceList(ctx context.Context, side *os.File) (int, error) {
	up := manifest.NewLink("up", p.url("capabilitylist.xml"))
	listed, per := p.listed(), p.o.ListThreshold
	docs := max(1, (listed+per-1)/per)
	links := []manifest.Link{up}
	if docs > 1 {
		links = append(links, manifest.NewLink("index", p.url("resourcelist.xml")))
	}
	digests := bufio.NewReaderSize(io.NewSectionReader(side, 0, int64(p.o.Resources)*hashRecordLen), 64<<10)
	next := 0 // next resource index to consider
	for d := range docs {
		rel := "resourcelist.xml"
		if docs > 1 {
			rel = docName("resourcelist", d+1, docs)
		}
		err := p.writeDoc(rel, manifest.Header{
			Root: manifest.URLSet, Metadata: p.snapshot(manifest.ResourceList), Links: links,
		}, func(w *manifest.Writer) error {
			for n := 0; n < per && next < p.o.Resources; next++ {
				if err := ctx.Err(); err != nil {
					return err
				}
				var rec [hashRecordLen]byte
				if _, err := io.ReadFull(digests, rec[:]); err != nil {
					return fmt.Errorf("digest record %d: %w", next, err)
				}
				r := p.resource(next)
				if r.rel == "" {
					continue
				}
				md := manifest.NewMetadata()
				md.Hashes = fixity.Hashes{MD5: rec[:md5.Size], SHA256: rec[md5.Size:]}
				md.Length, md.Type = r.size, r.typ
				if err := w.Write(&manifest.Entry{Loc: r.uri, Lastmod: r.lastmod, Metadata: md}); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if docs == 1 {
		return listed, nil
	}
	return listed, p.writeDoc("resourcelist.xml", manifest.Header{
		Root: manifest.SitemapIndex, Metadata: p.snapshot(manifest.ResourceList), Links: []manifest.Link{up},
	}, func(w *manifest.Writer) error {
		for d := range docs {
			if err := w.Write(&manifest.Entry{Loc: p.url(docName("resourcelist", d+1, docs)), Metadata: p.timesOnly()}); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeCapabilityList writes capabilitylist.xml.
func (p *plan) writeCapabilityList() error {
	md := manifest.NewMetadata()
	md.Capability = manifest.CapabilityList
	return p.writeDoc("capabilitylist.xml", manifest.Header{
		Root: manifest.URLSet, Metadata: md,
		Links: []manifest.Link{manifest.NewLink("up", p.url(".well-known/resourcesync"))},
	}, func(w *manifest.Writer) error {
		caps := []manifest.Capability{manifest.ResourceDump}
		if p.o.WriteResources {
			caps = []manifest.Capability{manifest.ResourceList, manifest.ResourceDump}
		}
		if p.o.ChangePackages > 0 {
			caps = append(caps, manifest.ChangeDump)
		}
		for _, c := range caps {
			md := manifest.NewMetadata()
			md.Capability = c
			if err := w.Write(&manifest.Entry{Loc: p.url(string(c) + ".xml"), Metadata: md}); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeSourceDescription writes .well-known/resourcesync.
func (p *plan) writeSourceDescription() error {
	md := manifest.NewMetadata()
	md.Capability = manifest.Description
	return p.writeDoc(".well-known/resourcesync", manifest.Header{Root: manifest.URLSet, Metadata: md},
		func(w *manifest.Writer) error {
			md := manifest.NewMetadata()
			md.Capability = manifest.CapabilityList
			return w.Write(&manifest.Entry{Loc: p.url("capabilitylist.xml"), Metadata: md})
		})
}
