package pipeline_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	benchharness "github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/testdata/javazip"
)

// change is one entry of a hand-made change package.
type change struct {
	uri  string
	kind manifest.Change
	at   string // W3C datetime
	body string
	raw  func(*manifest.Entry) // edits the entry (malformed cases)
}

// pkgSpec is one hand-made change package.
type pkgSpec struct {
	from, until string // until "" = open
	changes     []change
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := manifest.ParseDatetime(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func sums(b []byte) fixity.Hashes {
	m := md5.Sum(b)
	s := sha256.Sum256(b)
	return fixity.Hashes{MD5: m[:], SHA256: s[:]}
}

// writeChangeDump writes changedump.xml and its packages under dir, listing
// the packages in the order given (so a test can list them out of order),
// with rel="contents" manifest copies when contents is set.
func writeChangeDump(t *testing.T, dir string, pkgs []pkgSpec, contents bool) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "changes"), 0o755)
	var dumpEntries []*manifest.Entry
	open := false
	first := ""
	for i, p := range pkgs {
		var man bytes.Buffer
		md := manifest.NewMetadata()
		md.Capability = manifest.ChangeDumpManifest
		md.From = mustTime(t, p.from)
		if p.until != "" {
			md.Until = mustTime(t, p.until)
		} else {
			open = true
		}
		if first == "" || p.from < first {
			first = p.from
		}
		w, err := manifest.NewWriter(&man, manifest.Header{Root: manifest.URLSet, Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][2]string
		for k, c := range p.changes {
			e := &manifest.Entry{Loc: c.uri, Lastmod: mustTime(t, c.at), Metadata: manifest.NewMetadata()}
			e.Metadata.Change = c.kind
			e.Metadata.Datetime = mustTime(t, c.at)
			if c.kind != manifest.Deleted {
				path := fmt.Sprintf("/r%d-%d.txt", i, k)
				e.Metadata.Path = path
				e.Metadata.Hashes = sums([]byte(c.body))
				e.Metadata.Length = int64(len(c.body))
				e.Metadata.Type = "text/plain"
				bodies = append(bodies, [2]string{path[1:], c.body})
			}
			if c.raw != nil {
				c.raw(e)
			}
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// Sizes in the local headers, manifest.xml first: a package
		// that can be read as it downloads.
		es := []javazip.Entry{{Name: "manifest.xml", Body: man.Bytes()}}
		for _, b := range bodies {
			es = append(es, javazip.Entry{Name: b[0], Body: []byte(b[1])})
		}
		zbuf := bytes.NewBuffer(rawZip(t, es))
		name := fmt.Sprintf("changes/c%d.zip", i)
		os.WriteFile(filepath.Join(dir, name), zbuf.Bytes(), 0o644)
		pm := manifest.NewMetadata()
		pm.Type = "application/zip"
		pm.Length = int64(zbuf.Len())
		pm.Hashes = sums(zbuf.Bytes())
		pm.From = md.From
		pm.Until = md.Until
		e := &manifest.Entry{Loc: "http://127.0.0.1:PORTX/" + name, Metadata: pm}
		if contents {
			mname := fmt.Sprintf("changes/c%d.manifest.xml", i)
			os.WriteFile(filepath.Join(dir, mname), man.Bytes(), 0o644)
			e.Links = []manifest.Link{manifest.NewLink("contents", "http://127.0.0.1:PORTX/"+mname)}
		}
		dumpEntries = append(dumpEntries, e)
	}
	var doc bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability = manifest.ChangeDump
	md.From = mustTime(t, first)
	if !open {
		md.Until = mustTime(t, pkgs[len(pkgs)-1].until)
	}
	w, err := manifest.NewWriter(&doc, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range dumpEntries {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	os.WriteFile(filepath.Join(dir, "changedump.xml"), doc.Bytes(), 0o644)
}

func (h *harness) incremental(ctx context.Context, source string, rng pipeline.Range) *runreport.Report {
	h.t.Helper()
	opts := h.options(source)
	rep, err := pipeline.Incremental(ctx, opts, rng)
	if err != nil {
		h.t.Fatalf("incremental: %v", err)
	}
	return rep
}

// holdAsBaseline makes the destination hold uri with body as a baseline
// of source left it: in the sink, and recorded in the state.
func (h *harness) holdAsBaseline(ctx context.Context, source, uri, body string) {
	h.t.Helper()
	if err := h.sink.Put(ctx, sinkResource(uri, body), strings.NewReader(body)); err != nil {
		h.t.Fatal(err)
	}
	id, err := h.store.BeginRun(ctx, state.Run{Mode: "baseline", Source: source})
	if err != nil {
		h.t.Fatal(err)
	}
	rec := state.Resource{URI: uri, Source: source, Length: int64(len(body)), Hashes: sums([]byte(body)), Outcome: state.OutcomeWritten, RunID: id}
	if err := h.store.Commit(ctx, state.Batch{Resources: []state.Resource{rec}}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.store.FinishRun(ctx, id, time.Now(), runreport.StatusOK, nil); err != nil {
		h.t.Fatal(err)
	}
}

func res(n int) string { return fmt.Sprintf("http://example.com/res%d", n) }

// TestIncrementalSemantics covers the spec's Example 23 (res7 created then
// updated: only the second version is kept), deletes, both range
// boundaries, out-of-order packages and a resource updated in one package
// and deleted in a later one — with and without manifest copies, and
// whatever order packages are listed in.
func TestIncrementalSemantics(t *testing.T) {
	pkgs := []pkgSpec{
		{from: "2013-01-03T09:00:00Z", until: "2013-01-03T12:00:00Z", changes: []change{
			{uri: res(1), kind: manifest.Created, at: "2013-01-03T09:00:00Z", body: "res1 v1 at the lower boundary"},
			{uri: res(7), kind: manifest.Created, at: "2013-01-03T10:00:00Z", body: "res7 v1"},
			{uri: res(9), kind: manifest.Created, at: "2013-01-03T10:30:00Z", body: "res9 v1"},
			{uri: res(7), kind: manifest.Updated, at: "2013-01-03T11:00:00Z", body: "res7 v2 (Example 23)"},
			{uri: res(5), kind: manifest.Updated, at: "2013-01-03T11:30:00Z", body: "res5 v2, deleted later"},
			{uri: res(8), kind: manifest.Created, at: "2013-01-03T08:59:59Z", body: "before the range"},
		}},
		{from: "2013-01-03T12:00:00Z", until: "2013-01-03T18:00:00Z", changes: []change{
			{uri: res(5), kind: manifest.Deleted, at: "2013-01-03T13:00:00Z"},
			{uri: res(9), kind: manifest.Updated, at: "2013-01-03T14:00:00Z", body: "res9 v2"},
			{uri: res(2), kind: manifest.Created, at: "2013-01-03T15:00:00Z", body: "res2 at the upper boundary"},
			{uri: res(3), kind: manifest.Created, at: "2013-01-03T15:00:01Z", body: "after the range"},
		}},
	}
	want := map[string]string{
		res(1): "res1 v1 at the lower boundary",
		res(7): "res7 v2 (Example 23)",
		res(9): "res9 v2",
		res(2): "res2 at the upper boundary",
		res(4): "baseline res4",
	}
	rng := pipeline.Range{From: mustTime(t, "2013-01-03T09:00:00Z"), Until: mustTime(t, "2013-01-03T15:00:00Z")}
	for _, tc := range []struct {
		name     string
		contents bool
		reverse  bool
	}{{"manifests in packages", false, false}, {"manifest copies", true, false}, {"packages listed out of order", false, true}, {"copies, out of order", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			src := t.TempDir()
			list := append([]pkgSpec{}, pkgs...)
			if tc.reverse {
				list[0], list[1] = list[1], list[0]
			}
			writeChangeDump(t, src, list, tc.contents)
			srv := serve(t, src)
			h := newHarness(t)
			// What a baseline left: res4 and res5.
			h.holdAsBaseline(ctx, srv.URL+"changedump.xml", res(4), "baseline res4")
			h.holdAsBaseline(ctx, srv.URL+"changedump.xml", res(5), "baseline res5")
			rep := h.incremental(ctx, srv.URL+"changedump.xml", rng)
			if rep.Status != runreport.StatusOK || rep.Resources.Deleted != 1 {
				t.Fatalf("%s", rep.Summary())
			}
			got := h.held(ctx)
			if len(got) != len(want) {
				t.Errorf("sink holds %d resources, want %d: %v", len(got), len(want), keys(got))
			}
			for uri, body := range want {
				if string(got[uri]) != body {
					t.Errorf("%s = %q, want %q", uri, got[uri], body)
				}
			}
			checkCommitted(t, ctx, h.store, rep)
			r5, ok, err := recordOf(ctx, h.store, res(5))
			if err != nil || !ok || !r5.Deleted || !r5.ChangeTime.Equal(mustTime(t, "2013-01-03T13:00:00Z")) {
				t.Errorf("res5 state: %+v %v %v", r5, ok, err)
			}
			cp, ok, err := h.store.Checkpoint(ctx, srv.URL+"changedump.xml", "")
			if err != nil || !ok || !cp.Next.Equal(rng.Until) {
				t.Errorf("checkpoint %+v %v %v, want next %s", cp, ok, err, rng.Until)
			}
		})
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestIncrementalChecks: a Change Dump without a checkpoint or --from is
// refused; malformed change entries are permanent failures of that entry
// alone; the checkpoint follows the newest change when --until is absent.
func TestIncrementalChecks(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2014-01-01T00:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Created, at: "2014-01-01T01:00:00Z", body: "ok"},
		{uri: res(2), kind: "renamed", at: "2014-01-01T02:00:00Z", body: "unknown change type"},
		{uri: res(3), kind: manifest.Created, at: "2014-01-01T03:00:00Z", body: "no path", raw: func(e *manifest.Entry) { e.Metadata.Path = "" }},
		{uri: res(4), kind: manifest.Updated, at: "2014-01-01T04:00:00Z", body: "no datetime", raw: func(e *manifest.Entry) { e.Lastmod = time.Time{}; e.Metadata.Datetime = time.Time{} }},
		{uri: res(5), kind: manifest.Created, at: "2014-01-01T05:00:00Z", body: "also ok"},
	}}}, false)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	if _, err := pipeline.Incremental(ctx, h.options(source), pipeline.Range{}); !errors.Is(err, pipeline.ErrNoCheckpoint) {
		t.Fatalf("err = %v, want ErrNoCheckpoint", err)
	}
	rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2014-01-01")})
	if rep.Resources.Written != 2 || rep.Resources.Failed != 3 || rep.Status != runreport.StatusPartial {
		t.Fatalf("%s", rep.Summary())
	}
	for _, want := range []struct{ uri, msg string }{{res(2), "unknown change type"}, {res(3), "without a path"}, {res(4), "without a datetime"}} {
		found := false
		for _, f := range rep.Failures {
			if f.URI == want.uri && strings.Contains(f.Error, want.msg) && f.Permanent {
				found = true
			}
		}
		if !found {
			t.Errorf("no permanent failure %q for %s in %+v", want.msg, want.uri, rep.Failures)
		}
	}
	// Open dump, no --until: the next run starts at the newest change seen,
	// permanent failures do not hold it back.
	cp, ok, err := h.store.Checkpoint(ctx, source, "")
	if err != nil || !ok || !cp.Next.Equal(mustTime(t, "2014-01-01T05:00:00Z")) || !cp.Open {
		t.Fatalf("checkpoint %+v %v %v", cp, ok, err)
	}
	// From the checkpoint: nothing new, nothing rewritten.
	rep = h.incremental(ctx, source, pipeline.Range{})
	if rep.Resources.Written != 0 || rep.Resources.Unchanged != 1 {
		t.Fatalf("second run: %s", rep.Summary())
	}
}

// TestIncrementalFetchesOnlyWhatMatters counts the server's requests:
// packages outside the range are never requested, and with manifest copies
// only packages holding a winning change are downloaded.
func TestIncrementalFetchesOnlyWhatMatters(t *testing.T) {
	pkgs := []pkgSpec{
		{from: "2015-01-01T00:00:00Z", until: "2015-01-02T00:00:00Z", changes: []change{ // before the range
			{uri: res(1), kind: manifest.Created, at: "2015-01-01T10:00:00Z", body: "old"}}},
		{from: "2015-01-02T00:00:00Z", until: "2015-01-03T00:00:00Z", changes: []change{ // in range, but every change superseded
			{uri: res(2), kind: manifest.Created, at: "2015-01-02T10:00:00Z", body: "v1"},
			{uri: res(3), kind: manifest.Created, at: "2015-01-02T11:00:00Z", body: "v1"}}},
		{from: "2015-01-03T00:00:00Z", until: "2015-01-04T00:00:00Z", changes: []change{ // the winners
			{uri: res(2), kind: manifest.Updated, at: "2015-01-03T10:00:00Z", body: "v2"},
			{uri: res(3), kind: manifest.Deleted, at: "2015-01-03T11:00:00Z"}}},
		{from: "2015-01-05T00:00:00Z", changes: []change{ // after the range, open
			{uri: res(4), kind: manifest.Created, at: "2015-01-05T10:00:00Z", body: "new"}}},
	}
	rng := pipeline.Range{From: mustTime(t, "2015-01-02T00:00:01Z"), Until: mustTime(t, "2015-01-04T00:00:00Z")}
	for _, contents := range []bool{false, true} {
		t.Run(fmt.Sprintf("contents=%v", contents), func(t *testing.T) {
			src := t.TempDir()
			writeChangeDump(t, src, pkgs, contents)
			srv := serve(t, src)
			h := newHarness(t)
			h.holdAsBaseline(context.Background(), srv.URL+"changedump.xml", res(3), "held before") // so that its delete deletes
			rep := h.incremental(context.Background(), srv.URL+"changedump.xml", rng)
			if rep.Status != runreport.StatusOK || rep.Resources.Written != 1 || rep.Resources.Deleted != 1 {
				t.Fatalf("%s", rep.Summary())
			}
			for i, want := range []int{0, 1, 1, 0} {
				if contents && i == 1 {
					want = 0 // its manifest copy shows nothing wins there
				}
				if got := srv.Handler.Requests(fmt.Sprintf("/changes/c%d.zip", i)); got != want {
					t.Errorf("package %d requested %d times, want %d", i, got, want)
				}
			}
			if contents && rep.Bytes.Downloaded != fileSize(t, filepath.Join(src, "changes", "c2.zip")) {
				t.Errorf("downloaded %d bytes, want exactly the winning package", rep.Bytes.Downloaded)
			}
			if contents {
				// Again over the same range: every winner is already held,
				// so no package is downloaded at all.
				rep = h.incremental(context.Background(), srv.URL+"changedump.xml", rng)
				if rep.Bytes.Downloaded != 0 || rep.Resources.Written != 0 || srv.Handler.Requests("/changes/c2.zip") != 1 {
					t.Errorf("repeated catch-up downloaded %d bytes: %s", rep.Bytes.Downloaded, rep.Summary())
				}
			}
		})
	}
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestIncrementalStreams: an incremental run reads a change package as it
// downloads, as a baseline does: on a slow link the first winner reaches
// the sink before the package has finished downloading (without
// streaming, only after), and only the winners are written — a change
// superseded within the same package is passed by.
func TestIncrementalStreams(t *testing.T) {
	ctx := context.Background()
	const n = 60
	rnd := rand.New(rand.NewPCG(5, 5))
	day := mustTime(t, "2016-01-01")
	p := pkgSpec{from: manifest.FormatDatetime(day), until: manifest.FormatDatetime(day.AddDate(0, 0, 1))}
	want := map[string]string{}
	for i := range n {
		uri := res(3000 + i%(n-10)) // the last 10 changes update earlier resources
		kind := manifest.Created
		if _, ok := want[uri]; ok {
			kind = manifest.Updated
		}
		b := fmt.Sprintf("%s version %d;", uri, i) + randomText(rnd, 8<<10)
		p.changes = append(p.changes, change{uri: uri, kind: kind, at: manifest.FormatDatetime(day.Add(time.Duration(i+1) * time.Minute)), body: b})
		want[uri] = b
	}
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{p}, true)
	size := fileSize(t, filepath.Join(src, "changes", "c0.zip"))
	// About a second for the package.
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: benchharness.Wrap(float64(size), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", !disable), func(t *testing.T) {
			h := newHarness(t)
			cs := &countingSink{Sink: h.sink}
			ends := &packageEnd{}
			opts := h.options(srv.URL + "/changedump.xml")
			opts.Sinks = []sink.Sink{cs}
			opts.Client = fetch.New(fetch.Options{Transport: ends, StallTimeout: 10 * time.Second})
			opts.DisableStreaming = disable
			rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: day, Until: day.AddDate(0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(want)) {
				t.Fatalf("want %d written: %s", len(want), rep.Summary())
			}
			for uri, b := range want {
				if got, err := os.ReadFile(h.sink.Path(uri)); err != nil || string(got) != b {
					t.Errorf("%s: %v; not the winning version", uri, err)
				}
				if cs.put(uri) != 1 {
					t.Errorf("%s put %d times, want once", uri, cs.put(uri))
				}
			}
			first, end := cs.first, ends.at()
			if first.IsZero() || end.IsZero() {
				t.Fatalf("first put %v, download end %v", first, end)
			}
			if !disable && !first.Before(end) {
				t.Errorf("streaming: first put %v after the download ended", first.Sub(end))
			}
			if disable && first.Before(end) {
				t.Errorf("spooled: first put %v before the download ended", end.Sub(first))
			}
		})
	}
}

// randomText returns n random letters and digits: text deflate cannot
// shrink much.
func randomText(rnd *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rnd.IntN(len(alphabet))]
	}
	return string(b)
}

// TestUntilInTheFuture: an incremental run with --until later than now
// leaves its checkpoint at now, not at that --until: what the source
// publishes before then is read by the next run.
func TestUntilInTheFuture(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeChangeDump(t, src, []pkgSpec{{from: "2019-01-01T00:00:00Z", changes: []change{
		{uri: res(1), kind: manifest.Created, at: "2019-01-01T01:00:00Z", body: "res1"},
	}}}, false)
	srv := serve(t, src)
	source := srv.URL + "changedump.xml"
	h := newHarness(t)
	until := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	rep := h.incremental(ctx, source, pipeline.Range{From: mustTime(t, "2019-01-01T00:00:00Z"), Until: until})
	if rep.Status != runreport.StatusOK {
		t.Fatalf("%s", rep.Summary())
	}
	cp, ok, err := h.store.Checkpoint(ctx, source, "")
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	if now := time.Now(); cp.Next.After(now) {
		t.Errorf("checkpoint %s is later than now (%s): what the open dump adds before then is never read", cp.Next.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
}
