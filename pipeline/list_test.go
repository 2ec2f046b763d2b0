package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// TestListBaseline syncs a source from its Resource List (here a Resource
// List Index), GETting each resource concurrently and verifying it; a
// repeated run skips every resource by the list's hashes without a GET.
func TestListBaseline(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	srv := serve(t, src)
	gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 150, Packages: 2, Seed: 4, MeanSize: 1 << 10, WriteResources: true, ListThreshold: 60}
	res, err := bench.Generate(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Settings.Options = map[string]string{"prefer": "list"} })
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(res.Listed) || rep.Packages.Total != 0 {
		t.Fatalf("%s", rep.Summary())
	}
	want := truthAfter(t, gen, 0)
	for uri, b := range h.held(ctx) {
		if !bytes.Equal(want[uri], b) {
			t.Fatalf("%s differs", uri)
		}
	}
	before := srv.Handler.Stats().Requests
	rep = h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Settings.Options = map[string]string{"prefer": "list"} })
	if rep.Resources.Unchanged != int64(res.Listed) || rep.Resources.Written != 0 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if n := srv.Handler.Stats().Requests - before; n > 10 {
		t.Errorf("second run made %d requests; only documents should be read", n)
	}
}

// listSource writes a hand-made list-only source: a capability list with a
// resource list and a change list, the resources, and mirrors.
func listSource(t *testing.T, dir string, resources map[string]string, list []*manifest.Entry, changes []*manifest.Entry) {
	t.Helper()
	for p, body := range resources {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644)
	}
	write := func(name string, h manifest.Header, es []*manifest.Entry) { writeDoc(t, dir, name, h, es) }
	md := capability
	capEntry := func(name string, c manifest.Capability) *manifest.Entry {
		return &manifest.Entry{Loc: hostile0 + name, Metadata: md(c)}
	}
	write("capabilitylist.xml", manifest.Header{Root: manifest.URLSet, Metadata: md(manifest.CapabilityList)},
		[]*manifest.Entry{capEntry("resourcelist.xml", manifest.ResourceList), capEntry("changelist.xml", manifest.ChangeList)})
	rl := md(manifest.ResourceList)
	rl.At = mustTime(t, "2016-01-01T00:00:00Z")
	write("resourcelist.xml", manifest.Header{Root: manifest.URLSet, Metadata: rl}, list)
	cl := md(manifest.ChangeList)
	cl.From = mustTime(t, "2016-01-01T00:00:00Z")
	write("changelist.xml", manifest.Header{Root: manifest.URLSet, Metadata: cl}, changes)
}

const hostile0 = "http://127.0.0.1:PORTX/"

func listEntry(t *testing.T, path, body string, mirrors ...string) *manifest.Entry {
	e := &manifest.Entry{Loc: hostile0 + path, Lastmod: mustTime(t, "2015-12-31T00:00:00Z"), Metadata: manifest.NewMetadata()}
	e.Metadata.Hashes = sums([]byte(body))
	e.Metadata.Length = int64(len(body))
	for i, m := range mirrors {
		l := manifest.NewLink("duplicate", hostile0+m)
		l.Pri = i + 1
		e.Links = append(e.Links, l)
	}
	return e
}

func changeEntry(t *testing.T, path, body string, kind manifest.Change, at string) *manifest.Entry {
	e := listEntry(t, path, body)
	e.Lastmod = mustTime(t, at)
	e.Metadata.Change = kind
	if kind == manifest.Deleted {
		e.Metadata.Hashes, e.Metadata.Length = sums(nil), -1
		e.Metadata.Hashes.MD5, e.Metadata.Hashes.SHA256 = nil, nil
	}
	return e
}

// TestListOnlySource: a source with only a Resource List and a Change List
// works end to end — baseline, then changes (latest change per resource,
// deletes) — with a mirror used when the primary location fails, and a
// relative or non-HTTP loc failing alone.
func TestListOnlySource(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	listSource(t, dir,
		map[string]string{"r/a.txt": "a v1", "r/b.txt": "b v1", "mirror/c.txt": "c from the mirror", "r/d.txt": "d v2", "r/e.txt": "e v1"},
		[]*manifest.Entry{
			listEntry(t, "r/a.txt", "a v1"),
			func() *manifest.Entry {
				e := listEntry(t, "r/b.txt", "b v1")
				e.Links = []manifest.Link{manifest.NewLink("describedby", "http://example.org/meta/b.xml")}
				return e
			}(),
			listEntry(t, "r/c.txt", "c from the mirror", "missing/c.txt", "mirror/c.txt"),
			{Loc: "/relative/x.txt", Metadata: manifest.Metadata{Length: 1, Hashes: sums([]byte("x"))}},
			{Loc: "ftp://127.0.0.1/y.txt", Metadata: manifest.Metadata{Length: 1, Hashes: sums([]byte("y"))}},
		},
		[]*manifest.Entry{
			changeEntry(t, "r/d.txt", "d v1", manifest.Created, "2016-01-02T00:00:00Z"),
			changeEntry(t, "r/a.txt", "", manifest.Deleted, "2016-01-02T01:00:00Z"),
			changeEntry(t, "r/d.txt", "d v2", manifest.Updated, "2016-01-02T02:00:00Z"),
			changeEntry(t, "r/e.txt", "e v1", manifest.Created, "2016-01-02T03:00:00Z"),
		})
	failing := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/r/c.txt" {
				http.Error(w, "primary down", http.StatusInternalServerError)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{Wrap: failing})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	source := srv.URL + "capabilitylist.xml"
	u := func(p string) string { return srv.URL + p }
	h := newHarness(t)
	rep := h.baseline(ctx, source, nil)
	if rep.Resources.Written != 3 || rep.Resources.Failed != 2 {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	for _, f := range rep.Failures {
		if !f.Permanent || !strings.Contains(f.Error, "not an absolute http(s) URL") {
			t.Errorf("failure %+v", f)
		}
	}
	got := h.held(ctx)
	if string(got[u("r/c.txt")]) != "c from the mirror" || string(got[u("r/a.txt")]) != "a v1" {
		t.Fatalf("baseline held %v", keys(got))
	}
	if rb, ok, _ := recordOf(ctx, h.store, u("r/b.txt")); !ok || len(rb.Links) != 1 || rb.Links[0].Rel != "describedby" || rb.Links[0].Href != "http://example.org/meta/b.xml" {
		t.Errorf("describedby link not recorded: %+v", rb.Links)
	}
	rep = h.incremental(ctx, source, pipeline.Range{})
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 2 || rep.Resources.Deleted != 1 {
		t.Fatalf("incremental: %s", rep.Summary())
	}
	got = h.held(ctx)
	want := map[string]string{u("r/b.txt"): "b v1", u("r/c.txt"): "c from the mirror", u("r/d.txt"): "d v2", u("r/e.txt"): "e v1"}
	if len(got) != len(want) {
		t.Fatalf("held %v", keys(got))
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if n := srv.Handler.Requests("/r/d.txt"); n != 1 {
		t.Errorf("d.txt fetched %d times: only its latest change counts", n)
	}
	_ = fmt.Sprint
	_ = time.Second
}

// TestResourceSets: a Source Description with two Capability Lists; by
// default both sets are synced, each with its own checkpoint; --set picks
// one.
func TestResourceSets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var sets []*manifest.Entry
	for _, set := range []string{"books", "maps"} {
		sub := filepath.Join(dir, set)
		os.MkdirAll(sub, 0o755)
		body := set + " resource"
		e := listEntry(t, set+"/r/one.txt", body)
		listSource(t, sub, map[string]string{"r/one.txt": body}, []*manifest.Entry{e}, nil)
		// listSource wrote URLs relative to the root: point them into the set.
		for _, f := range []string{"capabilitylist.xml", "resourcelist.xml", "changelist.xml"} {
			p := filepath.Join(sub, f)
			b, _ := os.ReadFile(p)
			b = bytes.ReplaceAll(b, []byte(hostile0+"resourcelist.xml"), []byte(hostile0+set+"/resourcelist.xml"))
			b = bytes.ReplaceAll(b, []byte(hostile0+"changelist.xml"), []byte(hostile0+set+"/changelist.xml"))
			os.WriteFile(p, b, 0o644)
		}
		md := manifest.NewMetadata()
		md.Capability = manifest.CapabilityList
		sets = append(sets, &manifest.Entry{Loc: hostile0 + set + "/capabilitylist.xml", Metadata: md})
	}
	var buf bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability = manifest.Description
	w, _ := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
	for _, e := range sets {
		w.Write(e)
	}
	w.Close()
	os.MkdirAll(filepath.Join(dir, ".well-known"), 0o755)
	os.WriteFile(filepath.Join(dir, ".well-known", "resourcesync"), buf.Bytes(), 0o644)
	srv := serve(t, dir)

	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 2 {
		t.Fatalf("%s", rep.Summary())
	}
	for _, set := range []string{"books", "maps"} {
		if _, ok, _ := h.store.Checkpoint(ctx, srv.URL, srv.URL+set+"/capabilitylist.xml"); !ok {
			t.Errorf("no checkpoint for set %s", set)
		}
	}
	h2 := newHarness(t)
	rep = h2.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Set = "maps" })
	got := h2.held(ctx)
	if rep.Resources.Written != 1 || string(got[srv.URL+"maps/r/one.txt"]) != "maps resource" {
		t.Fatalf("--set maps: %s %v", rep.Summary(), keys(got))
	}
	_, err := pipeline.Baseline(ctx, func() pipeline.Options { o := h2.options(srv.URL); o.Set = "atlas"; return o }())
	if err == nil || !strings.Contains(err.Error(), `"atlas"`) {
		t.Fatalf("unknown set: %v", err)
	}
}

// TestUrlsetIndex: an index written with a <urlset> root (a real producers'
// mistake) is read as the index it means.
func TestUrlsetIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	listSource(t, dir, map[string]string{"r/a.txt": "a"}, []*manifest.Entry{listEntry(t, "r/a.txt", "a")}, nil)
	os.Rename(filepath.Join(dir, "resourcelist.xml"), filepath.Join(dir, "part1.xml"))
	md := manifest.NewMetadata()
	md.Capability = manifest.ResourceList
	child := &manifest.Entry{Loc: hostile0 + "part1.xml", Metadata: md}
	var buf bytes.Buffer
	w, _ := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
	w.Write(child)
	w.Close()
	os.WriteFile(filepath.Join(dir, "resourcelist.xml"), buf.Bytes(), 0o644)
	srv := serve(t, dir)
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", nil); rep.Status != runreport.StatusOK || rep.Resources.Written != 1 {
		t.Fatalf("%s", rep.Summary())
	}
}

// TestDiscoveryPaths: a bare site URL without /.well-known/resourcesync is
// still synced when its robots.txt names the capability list, and so is an
// HTML page that links it (the Link header and walking up are covered by
// the discovery package's tests). Finding the source reads nothing below
// the capability list: the walk that follows reads the tree down once.
func TestDiscoveryPaths(t *testing.T) {
	for _, how := range []string{"robots.txt", "html link"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			src := t.TempDir()
			srv := serve(t, src)
			gen := bench.GenOptions{Dir: src, Base: srv.URL, Resources: 30, Packages: 1, Seed: 2, MeanSize: 512, NoOddNames: true}
			if _, err := bench.Generate(ctx, gen); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(src, ".well-known", "resourcesync"))
			capList := srv.URL + "capabilitylist.xml"
			source := srv.URL
			switch how {
			case "robots.txt":
				os.WriteFile(filepath.Join(src, "robots.txt"), []byte("User-agent: *\nSitemap: "+capList+"\n"), 0o644)
			case "html link":
				os.WriteFile(filepath.Join(src, "index.html"), []byte(`<html><head><LINK href="`+capList+`" REL="resourcesync"></head></html>`), 0o644)
				source = srv.URL + "index.html"
			}
			h := newHarness(t)
			rep := h.baseline(ctx, source, nil)
			if rep.Status != runreport.StatusOK || rep.Resources.Written != 30 {
				t.Fatalf("%s", rep.Summary())
			}
			if hits := srv.Handler.Stats().ByPath; hits["/resourcedump.xml"] != 1 {
				t.Errorf("the Resource Dump was read %d times, want once (requests by path: %v)", hits["/resourcedump.xml"], hits)
			}
		})
	}
}

// TestConditionalGets: list entries without hashes (accepted by default,
// counted as unverified) are fetched once; on the next run a conditional GET
// with the recorded validators answers 304 and nothing is transferred or
// rewritten.
func TestConditionalGets(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bodies := map[string]string{"r/a.txt": strings.Repeat("a", 4000), "r/b.txt": strings.Repeat("b", 4000)}
	var list []*manifest.Entry
	for p := range bodies {
		e := listEntry(t, p, bodies[p])
		e.Metadata.Hashes = sums(nil)
		e.Metadata.Hashes.MD5, e.Metadata.Hashes.SHA256 = nil, nil
		list = append(list, e)
	}
	listSource(t, dir, bodies, list, nil)
	srv := serve(t, dir)
	h := newHarness(t)
	if rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", nil); rep.Resources.Written != 2 || rep.Resources.Unverified != 2 {
		t.Fatalf("%s", rep.Summary())
	}
	before := srv.Handler.Stats().BytesSent
	rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", nil)
	if rep.Resources.Unchanged != 2 || rep.Resources.Written != 0 {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if sent := srv.Handler.Stats().BytesSent - before; sent > 4000 {
		t.Errorf("second run transferred %d bytes: the conditional GETs should have answered 304", sent)
	}
}
