package harvest_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// sinkBodies reads every body an fs mirror holds.
func sinkBodies(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	inv, err := fs.New(dir, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	if err := inv.Walk(ctx, func(uri string) error {
		rc, err := inv.Get(ctx, uri)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		out[uri] = b
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSinkGivenBackFilled: a job harvested into a and b; a harvest with b
// removed from the job takes the source's changes into a alone, and b no
// longer counts as holding the source; given back to the job, b is a sink
// added since its last harvest, and filled: it holds what the state
// counts synced.
func TestSinkGivenBackFilled(t *testing.T) {
	ctx := context.Background()
	srv, gen := source(t)
	st := openStore(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	h := &harvest.Harvester{Store: st, Sinks: harvest.SinkKinds(), Log: slog.New(slog.DiscardHandler)}
	j := harvest.DefaultJob()
	j.Source, j.Sinks = srv.URL, []string{"fs:" + a, "fs:" + b}
	if rep, err := h.Run(ctx, harvest.Sync, j); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("first harvest: %v %+v", err, rep)
	}
	srv.Handler.Publish(-1)
	j.Sinks = []string{"fs:" + a}
	if rep, err := h.Run(ctx, harvest.Sync, j); err != nil || rep.Status != runreport.StatusOK || rep.Resources.Written == 0 {
		t.Fatalf("harvest into a alone: %v %+v", err, rep)
	}
	j.Sinks = []string{"fs:" + a, "fs:" + b}
	rep, err := h.Run(ctx, harvest.Sync, j)
	if err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("harvest with b back: %v %+v", err, rep)
	}
	want := map[string][]byte{}
	if err := bench.TruthAfter(ctx, gen, gen.ChangePackages, func(uri string, body io.Reader) error {
		bb, err := io.ReadAll(body)
		want[uri] = bb
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ga, gb := sinkBodies(t, a), sinkBodies(t, b)
	stale := 0
	for uri, w := range want {
		if !bytes.Equal(ga[uri], w) {
			t.Errorf("a: %s differs from the source", uri)
		}
		if !bytes.Equal(gb[uri], w) {
			stale++
		}
	}
	for uri := range gb {
		if _, ok := want[uri]; !ok {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("b, given back to the job, differs from the source (and from the state, which counts every resource synced) in %d resources after a harvest reported %s", stale, rep.Status)
	}
}

// truthAt is what the generated source holds after change package k.
func truthAt(t *testing.T, gen bench.GenOptions, k int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	if err := bench.TruthAfter(context.Background(), gen, k, func(uri string, body io.Reader) error {
		bb, err := io.ReadAll(body)
		want[uri] = bb
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestFillKeepsNewerVersion: a site harvested into a and b; c is added
// between them. The next harvest writes a resource's new version to a and
// c, while b refuses it: the state keeps the old version as its record,
// with deliveries saying a and c took the new one. The fill of c that
// follows does not write the record's (old) version over c's newer copy,
// so once b takes the new version every sink holds it.
func TestFillKeepsNewerVersion(t *testing.T) {
	ctx := context.Background()
	srv, gen := source(t)
	before, after := truthAt(t, gen, 0), truthAt(t, gen, gen.ChangePackages)
	var x string
	for uri, b := range before {
		if a, ok := after[uri]; ok && !bytes.Equal(a, b) {
			x = uri
			break
		}
	}
	if x == "" {
		t.Fatal("no resource updated by the changes")
	}
	st := openStore(t)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	var refuse atomic.Bool
	reg := harvest.SinkKinds()
	reg["faulty"] = func(ctx context.Context, arg string) (sink.Sink, error) {
		inner, err := fs.Open(ctx, arg)
		if err != nil {
			return nil, err
		}
		return sinkfault.New(inner, sinkfault.Options{Rules: []sinkfault.Rule{sinkfault.Only(sinkfault.OpPut, func(cl sinkfault.Call) error {
			if refuse.Load() && cl.URI == x {
				return sinkfault.Permanent("b refuses " + cl.URI)
			}
			return nil
		})}}), nil
	}
	h := &harvest.Harvester{Store: st, Sinks: reg, Log: slog.New(slog.DiscardHandler)}
	j := harvest.DefaultJob()
	j.Source, j.Sinks = srv.URL, []string{"fs:" + a, "faulty:" + b}
	if rep, err := h.Run(ctx, harvest.Sync, j); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("first harvest: %v %+v", err, rep)
	}
	srv.Handler.Publish(-1)
	refuse.Store(true)
	j.Sinks = []string{"fs:" + a, "fs:" + c, "faulty:" + b}
	rep, err := h.Run(ctx, harvest.Sync, j)
	if err != nil {
		t.Fatalf("harvest with c added: %v", err)
	}
	t.Logf("harvest with c added: %s", rep.Status)
	if got := sinkBodies(t, c)[x]; !bytes.Equal(got, after[x]) {
		t.Errorf("after the harvest that wrote %s to c and the fill of c, c holds %d bytes of an older version (want the %d of the version it was given)", x, len(got), len(after[x]))
	}
	// An index into a and c, which both took the newer version of x, gives
	// neither the record's and counts x neither written nor missing.
	if ix, err := h.Index(ctx, j, []string{"fs:" + a, "fs:" + c}); err != nil || ix.Written != ix.Held-1 || ix.Missing != 0 {
		t.Errorf("index into a and c: %v %+v, want every resource but %s written", err, ix, x)
	}
	refuse.Store(false)
	if rep, err := h.Run(ctx, harvest.Sync, j); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("harvest with b mended: %v %+v", err, rep)
	}
	for name, d := range map[string]string{"a": a, "b": b, "c": c} {
		if got := sinkBodies(t, d)[x]; !bytes.Equal(got, after[x]) {
			t.Errorf("%s: %s is not the source's current version after a harvest reported ok", name, x)
		}
	}
}
