package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rsharvest/rsharvest/manifest"
)

// The hidden directory of publication steps: stepsDir/K/ holds the Change
// Dump documents as they are while only packages 1 to K are published, and
// stepsFile tells a Handler which files each step hides. A Handler never
// serves the directory itself.
const (
	stepsDir  = ".steps"
	stepsFile = stepsDir + "/steps.json"
)

// stepsIndex is the content of stepsFile.
type stepsIndex struct {
	// Packages is the number of Change Dump packages.
	Packages int `json:"packages"`
	// Documents are the Change Dump documents (relative paths); a step K
	// may have its own variant of each under stepsDir/K/.
	Documents []string `json:"documents"`
	// Visible maps the relative path of each file that is not published
	// from the start (packages, their manifest copies, the documents of a
	// Change Dump Index) to the first step that publishes it.
	Visible map[string]int `json:"visible"`
}

// changeInfo is what the Change Dump says about one package.
type changeInfo struct {
	pkgInfo
	last time.Time // time of its last change
}

// changeDumpSpec describes Change Dump package k (1-based) holding cs.
func (p *plan) changeDumpSpec(k int, cs []change) pkgSpec {
	md := manifest.NewMetadata()
	md.Capability, md.From = manifest.ChangeDumpManifest, p.changeFrom(k)
	if !p.open(k) {
		md.Until = p.changeFrom(k + 1)
	}
	name := p.changeName(k)
	return pkgSpec{
		dir: "changes", name: name, logName: name,
		header: manifest.Header{Root: manifest.URLSet, Metadata: md,
			Links: []manifest.Link{manifest.NewLink("up", p.url("capabilitylist.xml"))}},
		manMod: cs[len(cs)-1].time,
		n:      len(cs),
		item: func(j int) pkgItem {
			c := cs[j]
			if c.kind == manifest.Deleted {
				r := p.resource(c.index)
				r.lastmod = c.time
				return pkgItem{r: r, change: c.kind}
			}
			return pkgItem{r: p.revision(c.index, c.version, c.time), change: c.kind}
		},
	}
}

// writeChangePackages simulates the change stream and adds the writing of
// every Change Dump package to g, each with a packer from packers. It
// returns the slice the packages' information lands in once g is done.
// Only the changes of the packages being written are held.
func (p *plan) writeChangePackages(ctx context.Context, g *errgroup.Group, packers chan *packer) []changeInfo {
	if p.o.ChangePackages == 0 {
		return nil
	}
	infos := make([]changeInfo, p.o.ChangePackages)
	s := newChangeStream(p)
	for k := 1; k <= p.o.ChangePackages; k++ {
		if err := ctx.Err(); err != nil {
			g.Go(func() error { return err })
			break
		}
		cs := slices.Clone(s.nextPackage(k))
		spec := p.changeDumpSpec(k, cs)
		g.Go(func() error {
			pk := <-packers // never blocks: at most workers goroutines run
			defer func() { packers <- pk }()
			info, err := pk.writePackage(ctx, spec)
			infos[k-1] = changeInfo{pkgInfo: info, last: cs[len(cs)-1].time}
			return err
		})
	}
	return infos
}

// writeChangeDumps writes changedump.xml (a Change Dump, or past
// IndexThreshold packages a Change Dump Index over changedump-0001.xml, …),
// the variants of the publication steps 0 to len(infos)-1 under stepsDir,
// and stepsFile.
func (p *plan) writeChangeDumps(ctx context.Context, infos []changeInfo) error {
	for v := range len(infos) {
		dir := path.Join(stepsDir, strconv.Itoa(v))
		if err := os.MkdirAll(filepath.Join(p.o.Dir, filepath.FromSlash(dir)), 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := p.writeChangeDumpDocs(ctx, dir+"/", infos, v); err != nil {
			return err
		}
	}
	if err := p.writeStepsFile(len(infos)); err != nil {
		return err
	}
	return p.writeChangeDumpDocs(ctx, "", infos, len(infos))
}

// writeStepsFile writes stepsFile for n packages.
func (p *plan) writeStepsFile(n int) error {
	idx := stepsIndex{Packages: n, Documents: []string{"changedump.xml"}, Visible: make(map[string]int)}
	for k := 1; k <= n; k++ {
		name := "changes/" + p.changeName(k)
		idx.Visible[name+".zip"] = k
		idx.Visible[name+".manifest.xml"] = k
	}
	if per := p.o.IndexThreshold; n > per {
		docs := (n + per - 1) / per
		for d := range docs {
			name := docName("changedump", d+1, docs)
			idx.Documents = append(idx.Documents, name)
			idx.Visible[name] = d*per + 1
		}
	}
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: %s: %w", stepsFile, err)
	}
	if err := os.WriteFile(filepath.Join(p.o.Dir, filepath.FromSlash(stepsFile)), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// changeRoot returns the root metadata of the Change Dump (or Index) while
// packages 1 to v of total are published: until only when the last package
// is published and closed.
func (p *plan) changeRoot(v, total int) manifest.Metadata {
	md := manifest.NewMetadata()
	md.Capability, md.From = manifest.ChangeDump, p.o.ChangeStart
	if v == total && p.o.ClosedLast {
		md.Until = p.changeFrom(total + 1)
	}
	return md
}

// writeChangeDumpDocs writes, with prefix before every file name, the
// Change Dump documents as they are while packages 1 to v of len(infos)
// are published. For a step (v < len(infos)) a Change Dump Index gets only
// the document that lists some but not all of its packages: the others
// are the same as when everything is published.
func (p *plan) writeChangeDumpDocs(ctx context.Context, prefix string, infos []changeInfo, v int) error {
	total, per := len(infos), p.o.IndexThreshold
	up := manifest.NewLink("up", p.url("capabilitylist.xml"))
	if total <= per {
		return p.writeDoc(prefix+"changedump.xml", manifest.Header{
			Root: manifest.URLSet, Metadata: p.changeRoot(v, total), Links: []manifest.Link{up},
		}, func(w *manifest.Writer) error { return p.writeChangeEntries(ctx, w, infos, 0, v) })
	}
	docs := (total + per - 1) / per
	index := manifest.NewLink("index", p.url("changedump.xml"))
	// docMeta is document d's interval as far as it is published.
	docMeta := func(d int) manifest.Metadata {
		lo, hi := d*per, min((d+1)*per, total)
		md := manifest.NewMetadata()
		md.From = p.changeFrom(lo + 1)
		if v >= hi && !p.open(hi) {
			md.Until = p.changeFrom(hi + 1)
		}
		return md
	}
	listed := 0
	for d := range docs {
		lo, hi := d*per, min((d+1)*per, total)
		if lo >= v {
			break
		}
		listed = d + 1
		if v < total && v >= hi {
			continue // complete: as when everything is published
		}
		md := docMeta(d)
		md.Capability = manifest.ChangeDump
		err := p.writeDoc(prefix+docName("changedump", d+1, docs), manifest.Header{
			Root: manifest.URLSet, Metadata: md, Links: []manifest.Link{up, index},
		}, func(w *manifest.Writer) error { return p.writeChangeEntries(ctx, w, infos, lo, min(hi, v)) })
		if err != nil {
			return err
		}
	}
	return p.writeDoc(prefix+"changedump.xml", manifest.Header{
		Root: manifest.SitemapIndex, Metadata: p.changeRoot(v, total), Links: []manifest.Link{up},
	}, func(w *manifest.Writer) error {
		for d := range listed {
			if err := w.Write(&manifest.Entry{Loc: p.url(docName("changedump", d+1, docs)), Metadata: docMeta(d)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeChangeEntries writes the Change Dump entries of packages lo+1 to hi
// (infos[lo:hi]).
func (p *plan) writeChangeEntries(ctx context.Context, w *manifest.Writer, infos []changeInfo, lo, hi int) error {
	for j := lo; j < hi; j++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, ci := j+1, infos[j]
		name := p.changeName(k)
		md := manifest.NewMetadata()
		md.Type, md.Length, md.Hashes = "application/zip", ci.length, ci.hashes
		md.From = p.changeFrom(k)
		if !p.open(k) {
			md.Until = p.changeFrom(k + 1)
		}
		contents := manifest.NewLink("contents", p.url("changes/"+name+".manifest.xml"))
		contents.Type = "application/xml"
		e := manifest.Entry{Loc: p.url("changes/" + name + ".zip"), Lastmod: ci.last, Metadata: md, Links: []manifest.Link{contents}}
		if err := w.Write(&e); err != nil {
			return err
		}
	}
	return nil
}
