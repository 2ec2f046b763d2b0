package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// writeDoc writes one ResourceSync document, name under dir.
func writeDoc(t *testing.T, dir, name string, h manifest.Header, es []*manifest.Entry) {
	t.Helper()
	var buf bytes.Buffer
	w, err := manifest.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// capability is a document's metadata naming capability c.
func capability(c manifest.Capability) manifest.Metadata {
	m := manifest.NewMetadata()
	m.Capability = c
	return m
}

// TestChangeDumpBeginsLater: a source offers a Change Dump that begins
// (its from) after the run's start, and a Change List covering the run
// from its start. The change published before the dump begins is read
// from the Change List, and the dump's changes from the dump; a run
// starting within the dump's time does not read the list.
func TestChangeDumpBeginsLater(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	// The Change Dump: one package [12:00, 14:00], y created at 13:00.
	writeChangeDump(t, src, []pkgSpec{{from: "2020-01-01T12:00:00Z", until: "2020-01-01T14:00:00Z", changes: []change{
		{uri: res(9), kind: manifest.Created, at: "2020-01-01T13:00:00Z", body: "y v1"},
	}}}, true)
	// The Change List from 10:00: x updated at 11:00; z created at 13:30,
	// a change of the dump's time (which the dump would list, were the
	// source consistent): not read from the list.
	os.MkdirAll(filepath.Join(src, "res"), 0o755)
	os.WriteFile(filepath.Join(src, "res/x.txt"), []byte("x v2"), 0o644)
	os.WriteFile(filepath.Join(src, "res/z.txt"), []byte("z v1"), 0o644)
	cl := capability(manifest.ChangeList)
	cl.From, cl.Until = mustTime(t, "2020-01-01T10:00:00Z"), mustTime(t, "2020-01-01T14:00:00Z")
	writeDoc(t, src, "changelist.xml", manifest.Header{Root: manifest.URLSet, Metadata: cl}, []*manifest.Entry{
		changeEntry(t, "res/x.txt", "x v2", manifest.Updated, "2020-01-01T11:00:00Z"),
		changeEntry(t, "res/z.txt", "z v1", manifest.Created, "2020-01-01T13:30:00Z"),
	})
	writeDoc(t, src, "capabilitylist.xml", manifest.Header{Root: manifest.URLSet, Metadata: capability(manifest.CapabilityList)}, []*manifest.Entry{
		{Loc: hostile0 + "changedump.xml", Metadata: capability(manifest.ChangeDump)},
		{Loc: hostile0 + "changelist.xml", Metadata: capability(manifest.ChangeList)},
	})
	var listReads atomic.Int64
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/changelist.xml" {
				listReads.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	source := srv.URL + "capabilitylist.xml"

	for _, tc := range []struct {
		name     string
		from     string
		x        string // held after the run
		listRead bool
	}{
		{"from within the dump's time", "2020-01-01T12:30:00Z", "x v1", false},
		{"from before the dump begins", "2020-01-01T10:00:00Z", "x v2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listReads.Store(0)
			h := newHarness(t)
			h.holdAsBaseline(ctx, source, srv.URL+"res/x.txt", "x v1")
			rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, tc.from), Until: mustTime(t, "2020-01-01T14:00:00Z")})
			got := h.held(ctx)
			if x, y := string(got[srv.URL+"res/x.txt"]), string(got[res(9)]); x != tc.x || y != "y v1" || rep.Status != runreport.StatusOK {
				t.Errorf("x = %q, y = %q; want %q, %q: %s", x, y, tc.x, "y v1", rep.Summary())
			}
			if z, ok := got[srv.URL+"res/z.txt"]; ok {
				t.Errorf("z = %q: a change of the dump's time read from the list", z)
			}
			if read := listReads.Load() > 0; read != tc.listRead {
				t.Errorf("the Change List read: %v, want %v", read, tc.listRead)
			}
		})
	}
}

// TestPackageHeldAtItsEarliestWinner: a change package whose from (12:00)
// is later than one of its own entries (x created at 11:30) fails to
// download. The plan knew that change from the package's manifest copy:
// the checkpoint is held before it, so the next run applies it.
func TestPackageHeldAtItsEarliestWinner(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{
		{from: "2020-01-01T10:00:00Z", until: "2020-01-01T12:00:00Z", changes: []change{
			{uri: res(1), kind: manifest.Created, at: "2020-01-01T11:00:00Z", body: "y"}}},
		{from: "2020-01-01T12:00:00Z", changes: []change{
			{uri: res(2), kind: manifest.Created, at: "2020-01-01T11:30:00Z", body: "x, listed before its package's from"},
			{uri: res(3), kind: manifest.Created, at: "2020-01-01T13:00:00Z", body: "z"}}},
	}, true)
	var down atomic.Bool
	down.Store(true)
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() && r.URL.Path == "/changes/c1.zip" {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	if rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2020-01-01T10:00:00Z")}); rep.Status != runreport.StatusPartial {
		t.Fatalf("first run: want partial (the second package down): %s", rep.Summary())
	}
	cp, _, err := h.store.Checkpoint(ctx, source, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := mustTime(t, "2020-01-01T11:30:00Z"); !cp.Next.Equal(want) {
		t.Errorf("checkpoint held at %s, want %s (the earliest change the failed package was to apply)", cp.Next.UTC(), want)
	}
	down.Store(false)
	rep := h.incremental(ctx, source, pipeline.Range{})
	got := h.held(ctx)
	if string(got[res(2)]) != "x, listed before its package's from" || string(got[res(3)]) != "z" {
		t.Errorf("after the second run: %s = %q, %s = %q: %s", res(2), got[res(2)], res(3), got[res(3)], rep.Summary())
	}
}

// TestMaxDeleteCountsOnlyDeletions: --max-delete counts only the deletes a
// run makes: re-running an earlier window whose delete is older than the
// version held deletes nothing, and --max-delete 0 lets it run.
func TestMaxDeleteCountsOnlyDeletions(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2020-01-01T10:00:00Z", until: "2020-01-01T14:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Deleted, at: "2020-01-01T11:00:00Z"},
		{uri: res(1), kind: manifest.Created, at: "2020-01-01T13:00:00Z", body: "x v3"},
	}}}, true)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2020-01-01T12:30:00Z"), Until: mustTime(t, "2020-01-01T14:00:00Z")})
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 1 {
		t.Fatalf("first run: %s", rep.Summary())
	}
	none, err := pipeline.ParseDeleteLimit("0")
	if err != nil {
		t.Fatal(err)
	}
	opts := h.options(source)
	opts.MaxDelete = none
	rep, err = pipeline.Incremental(ctx, opts, pipeline.Range{From: mustTime(t, "2020-01-01T10:00:00Z"), Until: mustTime(t, "2020-01-01T12:00:00Z")})
	if errors.Is(err, pipeline.ErrTooManyDeletes) {
		t.Errorf("--max-delete 0 stopped a run that deletes nothing (the delete is older than the version held): %v", err)
	} else if err != nil {
		t.Fatal(err)
	} else if rep.Resources.Deleted != 0 {
		t.Errorf("deleted %d: %s", rep.Resources.Deleted, rep.Summary())
	}
	if got := h.held(ctx); string(got[res(1)]) != "x v3" {
		t.Errorf("x = %q, want the newer version kept", got[res(1)])
	}
}

// TestEntryOutsideTheRangeIgnored: a malformed change entry dated before
// the run's range is not a change of the run: it is passed by, not
// reported, every time the open package is read again.
func TestEntryOutsideTheRangeIgnored(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2020-01-01T08:00:00Z", changes: []change{
		{uri: hostile0 + "res/a.txt", kind: "renamed", at: "2020-01-01T09:00:00Z", body: "before the range, an unknown change type"},
		{uri: res(2), kind: manifest.Created, at: "2020-01-01T11:00:00Z", body: "in range"},
		{uri: hostile0 + "res/b.txt", kind: "renamed", at: "2020-01-01T11:30:00Z", body: "in the range, an unknown change type"},
	}}}, true)
	os.MkdirAll(filepath.Join(src, "res"), 0o755)
	os.WriteFile(filepath.Join(src, "res/a.txt"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(src, "res/b.txt"), []byte("b"), 0o644)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	for i := range 2 {
		rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2020-01-01T10:00:00Z")})
		var failed []string
		for _, f := range rep.Failures {
			failed = append(failed, f.URI)
		}
		if want := hostile0 + "res/b.txt"; len(failed) != 1 || failed[0] != want || rep.Resources.Written != int64(1-i) {
			t.Errorf("run %d: failures %v, want only %s (the entry outside the range passed by): %s", i+1, failed, want, rep.Summary())
		}
	}
}
