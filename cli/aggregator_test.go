package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/schematest"
	"github.com/rsharvest/rsharvest/state"
)

// plainDestination is a ResourceSync Destination written here, as plain as
// one can be: it reads a Source's documents over HTTP and only ever GETs
// an entry's <loc> (no mirror, no via, no package), holding each body's
// sha-256 by its loc.
type plainDestination struct {
	t    *testing.T
	held map[string]string
	at   time.Time // the Resource List's, for the changes after it
}

// walk reads the document at u and its children (an index's, a Source
// Description's, a Capability List's of the capability want), calling fn
// with each entry of a document of capability want.
func (d *plainDestination) walk(u string, want manifest.Capability, fn func(h manifest.Header, e *manifest.Entry)) {
	d.t.Helper()
	resp, err := http.Get(u)
	if err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %v %v", u, resp, err)
	}
	defer resp.Body.Close()
	r, err := manifest.NewReader(resp.Body, manifest.Options{})
	if err != nil {
		d.t.Fatalf("%s: %v", u, err)
	}
	h := r.Header()
	var children []string
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.t.Fatalf("%s: %v", u, err)
		}
		switch c := h.Metadata.Capability; {
		case c == want && h.Root == manifest.URLSet:
			fn(h, e)
		case c == manifest.Description, c == want && h.Root == manifest.SitemapIndex:
			children = append(children, e.Loc)
		case c == manifest.CapabilityList && e.Metadata.Capability == want:
			children = append(children, e.Loc)
		}
	}
	for _, c := range children {
		d.walk(c, want, fn)
	}
}

// get fetches loc and holds its body's sha-256.
func (d *plainDestination) get(loc string) {
	d.t.Helper()
	resp, err := http.Get(loc)
	if err != nil || resp.StatusCode != http.StatusOK {
		d.t.Fatalf("GET %s: %v %v", loc, resp, err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		d.t.Fatal(err)
	}
	d.held[loc] = hex.EncodeToString(h.Sum(nil))
}

// baseline reads the Source's Resource List and fetches every loc.
func (d *plainDestination) baseline(sd string) {
	d.walk(sd, manifest.ResourceList, func(h manifest.Header, e *manifest.Entry) {
		d.at = h.Metadata.At
		d.get(e.Loc)
	})
}

// incremental applies the changes recorded after its baseline, in order.
func (d *plainDestination) incremental(sd string) (applied int) {
	d.walk(sd, manifest.ChangeList, func(_ manifest.Header, e *manifest.Entry) {
		if !e.Metadata.Datetime.After(d.at) {
			return
		}
		applied++
		if e.Metadata.Change == manifest.Deleted {
			delete(d.held, e.Loc)
			return
		}
		d.get(e.Loc)
	})
	return applied
}

// TestAggregator: rsharvest republishing with its copies served is the
// specification's aggregator (section 14.8): a Destination that only GETs
// each <loc> baselines from it, and, after the origin moved on and then
// stopped answering, catches up from its Change Lists — deletions
// included — holding exactly what rsharvest holds, without one request
// to the origin. A second rsharvest harvesting the first republishes the
// same resources with one via link, to the original; every document
// validates.
func TestAggregator(t *testing.T) {
	ctx := t.Context()
	var refuse atomic.Bool
	var originHits atomic.Int64
	origin, _ := changingSource(t, bench.GenOptions{Resources: 120, Packages: 2, Seed: 31, MeanSize: 2 << 10,
		ChangePackages: 1, ChangesPerPackage: 40, DeleteShare: 0.2, CreateShare: 0.2}, refusing(&refuse, &originHits))

	work := t.TempDir()
	stateA, mirrorA, outA := filepath.Join(work, "a.db"), filepath.Join(work, "a"), filepath.Join(work, "pub-a")
	sync := func(args ...string) {
		t.Helper()
		if code, out, errOut := run(t, append(args, "--log-level", "warn")...); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	serve := func(out, mirror string) (*httptest.Server, string) {
		srv := httptest.NewUnstartedServer(nil)
		base := "http://" + srv.Listener.Addr().String() + "/pub"
		h, err := (&publish.Server{Out: out, BaseURL: base, Copies: mustFS(t, mirror)}).Handler()
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = h
		srv.Start()
		t.Cleanup(srv.Close)
		return srv, base
	}
	pubA, baseA := serve(outA, mirrorA)
	sync("sync", "--source", origin.URL, "--sink", "fs:"+mirrorA, "--state", stateA)
	sync("publish", "--state", stateA, "--out", outA, "--base-url", baseA, "--copies")

	dest := &plainDestination{t: t, held: map[string]string{}}
	dest.baseline(pubA.URL + "/.well-known/resourcesync")

	// The origin moves on; rsharvest follows and republishes; then the
	// origin stops answering.
	origin.Handler.Publish(1)
	sync("sync", "--source", origin.URL, "--sink", "fs:"+mirrorA, "--state", stateA)
	sync("publish", "--state", stateA, "--out", outA, "--base-url", baseA, "--copies")
	schematest.Validate(t, filepath.Join(outA, publish.Current))
	refuse.Store(true)
	if n := dest.incremental(pubA.URL + "/.well-known/resourcesync"); n == 0 {
		t.Fatal("the destination applied no change")
	}
	if n := originHits.Load(); n != 0 {
		t.Errorf("the destination's sync made %d requests to the origin", n)
	}

	// What the destination holds is what rsharvest holds: each resource
	// by its copy's URI (the one rsharvest's Resource List gives, whose via
	// link names the original), with the original's bytes.
	st, err := state.Open(ctx, stateA)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // original URI → sha-256
	if err := st.WalkResources(ctx, state.SourceKey(origin.URL), func(r state.Resource) error {
		if !r.Deleted {
			want[manifest.ToURI(r.URI)] = hex.EncodeToString(r.Hashes.SHA256)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	listed := 0
	(&plainDestination{t: t}).walk(pubA.URL+"/.well-known/resourcesync", manifest.ResourceList, func(_ manifest.Header, e *manifest.Entry) {
		listed++
		via, ok := e.Link("via")
		if !ok || len(e.Links) != 1 || !strings.HasPrefix(e.Loc, baseA+"/") {
			t.Errorf("entry %s: want the copy's loc and one via link, got %+v", e.Loc, e.Links)
			return
		}
		if dest.held[e.Loc] != want[via.Href] || want[via.Href] == "" {
			t.Errorf("%s (the copy of %s): the destination holds %q, rsharvest %q", e.Loc, via.Href, dest.held[e.Loc], want[via.Href])
		}
	})
	if len(dest.held) != len(want) || listed != len(want) {
		t.Errorf("the destination holds %d resources, rsharvest %d, its Resource List lists %d", len(dest.held), len(want), listed)
	}

	// A chain: rsharvest B harvests A (under A's URIs, the default) and
	// republishes; each entry keeps one via, the original's.
	stateB, mirrorB, outB := filepath.Join(work, "b.db"), filepath.Join(work, "b"), filepath.Join(work, "pub-b")
	pubB, baseB := serve(outB, mirrorB)
	sync("sync", "--source", pubA.URL+"/.well-known/resourcesync", "--sink", "fs:"+mirrorB, "--state", stateB)
	sync("publish", "--state", stateB, "--out", outB, "--base-url", baseB, "--copies")
	schematest.Validate(t, filepath.Join(outB, publish.Current))
	chained := 0
	(&plainDestination{t: t}).walk(pubB.URL+"/.well-known/resourcesync", manifest.ResourceList, func(_ manifest.Header, e *manifest.Entry) {
		chained++
		via, ok := e.Link("via")
		if !ok || len(e.Links) != 1 || want[via.Href] == "" || !strings.HasPrefix(e.Loc, baseB+"/") || via.Length <= 0 || via.Hashes.SHA256 == nil {
			t.Errorf("B's entry %s: want one via link to the original (with its hash and length), got %+v", e.Loc, e.Links)
		}
	})
	if chained != len(want) {
		t.Errorf("B republishes %d resources, A holds %d", chained, len(want))
	}
}
