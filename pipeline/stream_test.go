package pipeline_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"

	"github.com/rsharvest/rsharvest/bench"
	benchharness "github.com/rsharvest/rsharvest/bench/harness"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/state"
	"github.com/rsharvest/rsharvest/testdata/hostile"
	"github.com/rsharvest/rsharvest/unzip"
)

// countingSink counts Puts per URI and records when the first Put began.
type countingSink struct {
	sink.Sink
	mu    sync.Mutex
	puts  map[string]int
	first time.Time
}

func (c *countingSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	c.mu.Lock()
	if c.first.IsZero() {
		c.first = time.Now()
	}
	if c.puts == nil {
		c.puts = map[string]int{}
	}
	c.puts[r.URI]++
	c.mu.Unlock()
	return c.Sink.Put(ctx, r, body)
}

func (c *countingSink) put(uri string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts[uri]
}

// packageEnd is a transport that records when the body of a package (a
// .zip) has been read to its end.
type packageEnd struct {
	mu  sync.Mutex
	end time.Time
}

func (p *packageEnd) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, ".zip") {
		resp.Body = &endBody{ReadCloser: resp.Body, p: p}
	}
	return resp, err
}

func (p *packageEnd) at() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.end
}

type endBody struct {
	io.ReadCloser
	p *packageEnd
}

func (b *endBody) Read(q []byte) (int, error) {
	n, err := b.ReadCloser.Read(q)
	if err == io.EOF {
		b.p.mu.Lock()
		if b.p.end.IsZero() {
			b.p.end = time.Now()
		}
		b.p.mu.Unlock()
	}
	return n, err
}

// records returns the state's resource records by URI, without the fields
// that differ between two runs of the same sync.
func records(t *testing.T, st *state.Store) map[string]state.Resource {
	t.Helper()
	out := map[string]state.Resource{}
	err := st.WalkResources(context.Background(), "", func(r state.Resource) error {
		r.RunID, r.Updated = 0, time.Time{}
		out[r.URI] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// manifestLocs lists the URIs of a generated package's manifest copy.
func manifestLocs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := manifest.NewReader(f, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Loc)
	}
}

// TestStreamingGeneratedPackages: the generator writes every entry with its
// sizes in its local header (nothing stops the local scan before the
// central directory), manifest.xml first.
func TestStreamingGeneratedPackages(t *testing.T) {
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 300, Packages: 2, Seed: 5, MeanSize: 3 << 10}
	if _, err := bench.Generate(context.Background(), gen); err != nil {
		t.Fatal(err)
	}
	zips, _ := filepath.Glob(filepath.Join(src, "packages", "*.zip"))
	if len(zips) != 2 {
		t.Fatalf("%d packages", len(zips))
	}
	for _, z := range zips {
		b, err := os.ReadFile(z)
		if err != nil {
			t.Fatal(err)
		}
		sc := unzip.NewLocalScanner(bytes.NewReader(b), unzip.Limits{})
		var names []string
		methods := map[uint16]int{}
		for {
			e, err := sc.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: after %d entries: %v", z, len(names), err)
			}
			names = append(names, e.Name)
			methods[e.Method]++
		}
		if len(names) != 151 || names[0] != unzip.ManifestName || methods[zip.Store] == 0 || methods[zip.Deflate] == 0 {
			t.Fatalf("%s: %d entries (first %q), methods %v", z, len(names), names[0], methods)
		}
	}
}

// TestStreamingSameAsSpooled: with and without streaming, the same source
// ends in the same sink content, state records and report counts.
func TestStreamingSameAsSpooled(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 600, Packages: 3, Seed: 17, MeanSize: 4 << 10}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	type outcome struct {
		held    map[string][]byte
		records map[string]state.Resource
		rep     *runreport.Report
	}
	run := func(disable bool) outcome {
		h := newHarness(t)
		rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.DisableStreaming = disable })
		return outcome{h.held(ctx), records(t, h.store), rep}
	}
	on, off := run(false), run(true)
	if on.rep.Status != runreport.StatusOK || off.rep.Status != runreport.StatusOK || on.rep.Resources != off.rep.Resources ||
		on.rep.Packages != off.rep.Packages || on.rep.Bytes.Written != off.rep.Bytes.Written {
		t.Fatalf("streaming:\n%s\nspooled:\n%s", on.rep.Summary(), off.rep.Summary())
	}
	if len(on.held) != 600 || len(on.held) != len(off.held) {
		t.Fatalf("sinks hold %d and %d resources", len(on.held), len(off.held))
	}
	for uri, b := range off.held {
		if !bytes.Equal(on.held[uri], b) {
			t.Fatalf("%s differs", uri)
		}
	}
	if len(on.records) != len(off.records) {
		t.Fatalf("%d and %d state records", len(on.records), len(off.records))
	}
	for uri, r := range off.records {
		o := on.records[uri]
		if o.URI != r.URI || o.Length != r.Length || !o.Hashes.Equal(r.Hashes) || o.Type != r.Type || !o.Lastmod.Equal(r.Lastmod) ||
			!o.ChangeTime.Equal(r.ChangeTime) || o.Package != r.Package || o.Outcome != r.Outcome || o.Deleted != r.Deleted ||
			o.ResourceSet != r.ResourceSet || !slices.Equal(o.Links, r.Links) {
			t.Fatalf("%s: record %+v, spooled %+v", uri, o, r)
		}
	}
}

// TestStreamingOverlapsDownload: on a slow link, resources reach the sink
// before their package has finished downloading; without streaming, only
// after.
func TestStreamingOverlapsDownload(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 200, Packages: 1, Seed: 9, MeanSize: 4 << 10}
	gr, err := bench.Generate(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	// About a second per package.
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: benchharness.Wrap(float64(gr.PackageBytes), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	for _, disable := range []bool{false, true} {
		h := newHarness(t)
		cs := &countingSink{Sink: h.sink}
		ends := &packageEnd{}
		rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) {
			o.Sinks = []sink.Sink{cs}
			o.Client = fetch.New(fetch.Options{Transport: ends, StallTimeout: 10 * time.Second})
			o.DisableStreaming = disable
		})
		if rep.Status != runreport.StatusOK || rep.Resources.Written != 200 {
			t.Fatalf("%s", rep.Summary())
		}
		first, end := cs.first, ends.at()
		if first.IsZero() || end.IsZero() {
			t.Fatalf("first put %v, download end %v", first, end)
		}
		if !disable && !first.Before(end) {
			t.Errorf("streaming: first put %v after the download ended (%v)", first.Sub(end), end)
		}
		if disable && first.Before(end) {
			t.Errorf("spooled: first put %v before the download ended", end.Sub(first))
		}
	}
}

// TestStreamingPackageHashFails: a package whose bytes differ from its
// dump's hashes in the middle of the file (entries streamed before the
// download ends) is recorded as failed, so the next run fetches it again,
// but what was delivered as it arrived stays delivered and recorded: each
// of those entries verified against its own manifest entry. The entry
// holding the damaged byte is neither delivered nor recorded as failed (its
// failure may be the transfer's, and the package's is what is recorded);
// the other package is delivered. The next run, once the
// package is whole, delivers the rest and finds the streamed ones held.
func TestStreamingPackageHashFails(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	gen := bench.GenOptions{Dir: src, Resources: 200, Packages: 2, Seed: 21, MeanSize: 2 << 10}
	gr, err := bench.Generate(ctx, gen)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(src, "packages", "part-00001.zip")
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	flip := len(b) / 2 // in the middle: entries before it and after it verify on their own
	b[flip] ^= 0x01
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	badURIs := manifestLocs(t, filepath.Join(src, "packages", "part-00001.manifest.xml"))
	goodURIs := manifestLocs(t, filepath.Join(src, "packages", "part-00002.manifest.xml"))
	// On a slow link (about a second), so that entries are streamed before
	// the download ends and fails.
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{Wrap: benchharness.Wrap(float64(gr.PackageBytes), 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := newHarness(t)
	cs := &countingSink{Sink: h.sink}
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Sinks = []sink.Sink{cs} })
	if rep.Status != runreport.StatusPartial || rep.Packages.Failed != 1 || rep.Resources.Written < int64(len(goodURIs)) ||
		rep.Resources.Failed != 0 || rep.Bytes.Written <= 0 {
		t.Fatalf("%s", rep.Summary())
	}
	if len(rep.Failures) != 1 || !strings.HasSuffix(rep.Failures[0].URI, "part-00001.zip") || rep.Failures[0].Stage != "download" ||
		!strings.Contains(rep.Failures[0].Error, "mismatch") {
		t.Fatalf("failures %+v", rep.Failures)
	}
	held := h.held(ctx)
	recs := records(t, h.store)
	kept := 0
	for _, uri := range badURIs {
		body, ok := held[uri]
		r, recorded := recs[uri]
		switch {
		case ok && (!recorded || r.Outcome != state.OutcomeWritten || r.Length != int64(len(body))):
			t.Errorf("%s held but recorded %+v", uri, r)
		case ok:
			kept++
			if cs.put(uri) != 1 {
				t.Errorf("%s put %d times", uri, cs.put(uri))
			}
		case recorded:
			t.Errorf("%s not held but recorded %+v", uri, r)
		}
	}
	if kept == 0 {
		t.Error("nothing of the bad package was delivered as it arrived: the test does not test streaming")
	}
	if kept == len(badURIs) {
		t.Error("every resource of the bad package was delivered: the test does not test a failing package")
	}
	for _, uri := range goodURIs {
		if _, ok := held[uri]; !ok || recs[uri].Outcome != state.OutcomeWritten {
			t.Errorf("%s not delivered", uri)
		}
	}
	if rep.Resources.Written != int64(len(goodURIs)+kept) {
		t.Errorf("written %d, want %d good and %d streamed", rep.Resources.Written, len(goodURIs), kept)
	}
	// The next run delivers the package once it is whole again.
	b[flip] ^= 0x01
	os.WriteFile(bad, b, 0o644)
	rep = h.baseline(ctx, srv.URL, nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != int64(len(badURIs)-kept) {
		t.Fatalf("second run: %s", rep.Summary())
	}
	if held := h.held(ctx); len(held) != len(badURIs)+len(goodURIs) {
		t.Errorf("sink holds %d resources, want %d", len(held), len(badURIs)+len(goodURIs))
	}
}

// rawFile is one entry of a hand-built package.
type rawFile struct {
	name   string
	body   []byte
	method uint16
	mode   fs.FileMode // 0: regular
	listed bool        // in the manifest (as /name)
	uri    string      // "" for an entry not listed
}

// buildRaw writes a package: manifest.xml (stored) listing the listed
// entries, then the entries, every one with its sizes and CRC-32 in its
// local header.
func buildRaw(t *testing.T, files []rawFile) []byte {
	t.Helper()
	man := manifestOf(t, files)
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	add := func(name string, body []byte, method uint16, mode fs.FileMode) {
		data := body
		if method == zip.Deflate {
			var d bytes.Buffer
			fw, _ := flate.NewWriter(&d, flate.BestSpeed)
			fw.Write(body)
			fw.Close()
			data = d.Bytes()
		}
		fh := &zip.FileHeader{Name: name, Method: method, CRC32: crc32.ChecksumIEEE(body),
			CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(len(body))}
		if mode != 0 {
			fh.SetMode(mode)
		}
		w, err := zw.CreateRaw(fh)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	add(unzip.ManifestName, man, zip.Store, 0)
	for _, f := range files {
		add(f.name, f.body, f.method, f.mode)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// manifestOf is a manifest listing the listed files.
func manifestOf(t *testing.T, files []rawFile) []byte {
	t.Helper()
	var man bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability, md.At = manifest.ResourceDumpManifest, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mw, err := manifest.NewWriter(&man, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !f.listed || seen[f.name] {
			continue
		}
		seen[f.name] = true
		m := manifest.NewMetadata()
		m5, s256 := md5.Sum(f.body), sha256.Sum256(f.body)
		m.Hashes, m.Length, m.Path = fixity.Hashes{MD5: m5[:], SHA256: s256[:]}, int64(len(f.body)), "/"+f.name
		if err := mw.Write(&manifest.Entry{Loc: f.uri, Lastmod: md.At, Metadata: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return man.Bytes()
}

// TestTwoManifests: a package whose first entry is a manifest.xml that its
// central directory names otherwise, and whose central directory's
// manifest.xml comes later and lists other entries. Read once downloaded,
// only what the central directory's manifest lists is delivered. Read as
// it arrives, the entries the first manifest lists were delivered before
// the central directory was seen: their bytes, verified against that
// listing, stay, and the run records under each URI that the package's
// own manifest does not list it (the run is partial), instead of calling
// its entry skipped.
func TestTwoManifests(t *testing.T) {
	ctx := context.Background()
	const first, own = "http://example.org/two/first", "http://example.org/two/own"
	aBody := bytes.Repeat([]byte("only the first manifest lists these bytes "), 50)
	bBody := bytes.Repeat([]byte("the package's own manifest lists these "), 50)
	b := buildRaw(t, []rawFile{
		{name: "a", body: aBody, method: zip.Store, listed: true, uri: first},
		{name: unzip.ManifestName, body: manifestOf(t, []rawFile{{name: "b", body: bBody, listed: true, uri: own}}), method: zip.Store},
		{name: "b", body: bBody, method: zip.Store},
	})
	// The central directory names the first manifest.xml otherwise.
	i := bytes.Index(b, []byte{'P', 'K', 1, 2})
	n := int(binary.LittleEndian.Uint16(b[i+28:]))
	if string(b[i+46:i+46+n]) != unzip.ManifestName {
		t.Fatalf("first record %q", b[i+46:i+46+n])
	}
	b[i+46+7] = 'X'
	dir := t.TempDir()
	writeDump(t, dir, map[string][]byte{"p.zip": b})
	srv := serve(t, dir)

	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprint("streaming=", streaming), func(t *testing.T) {
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+"resourcedump.xml", func(o *pipeline.Options) { o.DisableStreaming = !streaming })
			held := h.held(ctx)
			if !bytes.Equal(held[own], bBody) {
				t.Errorf("%s not delivered: %s", own, rep.Summary())
			}
			var noted, skipped bool
			for _, f := range rep.Failures {
				noted = noted || f.URI == first && strings.Contains(f.Error, "own manifest.xml")
			}
			for _, s := range rep.Skips {
				skipped = skipped || s.Entry == "a"
			}
			_, delivered := held[first]
			switch {
			case !streaming && (delivered || noted || !skipped || rep.Status != runreport.StatusOK):
				t.Errorf("read once downloaded: %s delivered %v, noted %v, entry a skipped %v; want only skipped\n%s", first, delivered, noted, skipped, rep.Summary())
			case streaming && (!bytes.Equal(held[first], aBody) || !noted || skipped || rep.Status != runreport.StatusPartial):
				t.Errorf("read as it arrived: %s delivered %v, noted %v, entry a skipped %v; want delivered, noted, not skipped, partial\n%s", first, delivered, noted, skipped, rep.Summary())
			}
		})
	}
}

// writeDump writes resourcedump.xml listing the packages (name → bytes)
// under dir, with the placeholder base bench.Serve rewrites.
func writeDump(t *testing.T, dir string, pkgs map[string][]byte) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, "packages"), 0o755)
	var buf bytes.Buffer
	md := manifest.NewMetadata()
	md.Capability, md.At = manifest.ResourceDump, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := manifest.NewWriter(&buf, manifest.Header{Root: manifest.URLSet, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range pkgs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b := pkgs[n]
		if err := os.WriteFile(filepath.Join(dir, "packages", n), b, 0o644); err != nil {
			t.Fatal(err)
		}
		m := manifest.NewMetadata()
		m5, s256 := md5.Sum(b), sha256.Sum256(b)
		m.Hashes, m.Length, m.Type, m.At = fixity.Hashes{MD5: m5[:], SHA256: s256[:]}, int64(len(b)), "application/zip", md.At
		if err := w.Write(&manifest.Entry{Loc: bench.Placeholder + "packages/" + n, Metadata: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resourcedump.xml"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// patchCentralCRC changes the CRC-32 the central directory gives for name
// (the local header keeps the true one).
func patchCentralCRC(t *testing.T, b []byte, name string) {
	t.Helper()
	sig := []byte{'P', 'K', 1, 2}
	for i := bytes.Index(b, sig); i >= 0; {
		n := int(binary.LittleEndian.Uint16(b[i+28:]))
		if string(b[i+46:i+46+n]) == name {
			b[i+16] ^= 0xff
			return
		}
		j := bytes.Index(b[i+4:], sig)
		if j < 0 {
			break
		}
		i += 4 + j
	}
	t.Fatalf("no central directory record for %q", name)
}

// TestStreamingCentralDirectoryRefuses: an entry streamed before the
// central directory arrives, which the central directory then refuses or
// describes otherwise, stays delivered and recorded (its bytes verified
// against its manifest entry: nothing is taken back), and the refusal is
// recorded as its failure with the words a run without streaming uses, so
// the run ends partial; the package's other resources are delivered.
func TestStreamingCentralDirectoryRefuses(t *testing.T) {
	uri := func(n string) string { return "http://example.org/refused/" + n }
	good := func(n string) rawFile {
		return rawFile{name: n, body: bytes.Repeat([]byte("good "+n+" "), 300), method: zip.Deflate, listed: true, uri: uri(n)}
	}
	tests := []struct {
		name   string
		files  []rawFile
		patch  func(t *testing.T, b []byte)
		victim string // URI the central directory refuses
		reason string
	}{
		{name: "duplicate name", victim: uri("dup"), reason: "duplicate", files: []rawFile{
			good("a"), {name: "dup", body: []byte("first copy"), listed: true, uri: uri("dup")}, good("b"),
			{name: "dup", body: []byte("second copy"), method: zip.Deflate}, good("c"),
		}},
		{name: "symlink", victim: uri("link"), reason: "symlink", files: []rawFile{
			good("a"), {name: "link", body: []byte("/etc/passwd"), mode: fs.ModeSymlink | 0o777, listed: true, uri: uri("link")}, good("b"),
		}},
		{name: "device", victim: uri("dev"), reason: "device", files: []rawFile{
			good("a"), {name: "dev", body: []byte{}, mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, listed: true, uri: uri("dev")}, good("b"),
		}},
		{name: "central directory disagrees", victim: uri("crc"), reason: "otherwise than its local header", files: []rawFile{
			good("a"), {name: "crc", body: []byte("the local header tells the truth"), method: zip.Deflate, listed: true, uri: uri("crc")}, good("b"),
		}, patch: func(t *testing.T, b []byte) { patchCentralCRC(t, b, "crc") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b := buildRaw(t, tc.files)
			if tc.patch != nil {
				tc.patch(t, b)
			}
			writeDump(t, dir, map[string][]byte{"p.zip": b})
			srv := serve(t, dir)
			h := newHarness(t)
			cs := &countingSink{Sink: h.sink}
			rep := h.baseline(ctx, srv.URL+"resourcedump.xml", func(o *pipeline.Options) { o.Sinks = []sink.Sink{cs} })
			held := h.held(ctx)
			var listed []byte
			for _, f := range tc.files {
				if f.uri == tc.victim && listed == nil {
					listed = append([]byte{}, f.body...)
				}
			}
			if got, ok := held[tc.victim]; !ok || !bytes.Equal(got, listed) {
				t.Errorf("%s: sink holds %q (%v), want the bytes its manifest entry lists", tc.victim, got, ok)
			}
			if cs.put(tc.victim) != 1 {
				t.Errorf("%s put %d times, want once (as it arrived)", tc.victim, cs.put(tc.victim))
			}
			if r, ok := records(t, h.store)[tc.victim]; !ok || r.Outcome != state.OutcomeWritten {
				t.Errorf("%s recorded %+v", tc.victim, r)
			}
			var fails []string
			for _, f := range rep.Failures {
				fails = append(fails, f.URI+": "+f.Error)
			}
			if rep.Status != runreport.StatusPartial || len(rep.Failures) != 1 || rep.Failures[0].URI != tc.victim || rep.Failures[0].Stage != "unzip" ||
				!strings.Contains(strings.ToLower(rep.Failures[0].Error), tc.reason) {
				t.Errorf("failures %q, want one for %s (%s)\n%s", fails, tc.victim, tc.reason, rep.Summary())
			}
			written := 0
			for _, f := range tc.files {
				if f.uri != "" {
					written++
					if f.uri != tc.victim && !bytes.Equal(held[f.uri], f.body) {
						t.Errorf("%s not delivered", f.uri)
					}
				}
			}
			if rep.Resources.Written != int64(written) || rep.Resources.Failed != 0 || rep.Packages.Done != 1 {
				t.Errorf("%s", rep.Summary())
			}
		})
	}
}

// rewriteRaw copies a ZIP archive entry by entry (duplicates, attributes
// and raw data kept) with every entry's sizes in its local header, as a
// writer does to a seekable file. It returns nil for bytes that do not
// open as a ZIP archive.
func rewriteRaw(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		fh := f.FileHeader
		fh.Flags &^= 0x8
		w, err := zw.CreateRaw(&fh)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := f.OpenRaw()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, rc); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestStreamingHostile runs the hostile corpus with its packages rewritten
// so that they can be streamed (sizes in the local headers): every case
// ends as its expectation says, as TestBaselineHostile checks without
// streaming, with the same failures word for word — except that the
// symlink, device and duplicate-name entries the central directory refuses
// after they verified against their manifest entries as they arrived stay
// delivered.
func TestStreamingHostile(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	hs, err := hostile.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	// Rewrite the packages, and the dump's lengths and hashes of them.
	dumpPath := filepath.Join(src, "resourcedump.xml")
	df, err := os.Open(dumpPath)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := manifest.NewReader(df, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	w, err := manifest.NewWriter(&dump, rd.Header())
	if err != nil {
		t.Fatal(err)
	}
	rewritten := 0
	for {
		e, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(src, filepath.FromSlash(strings.TrimPrefix(e.Loc, hostile.Base)))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if nb := rewriteRaw(t, b); nb != nil && !strings.Contains(e.Loc, "trailing-junk") {
			wrong := string(e.Metadata.Hashes.SHA256) != string(sha256Of(b))
			m5, s256 := md5.Sum(nb), sha256.Sum256(nb)
			e.Metadata.Hashes, e.Metadata.Length = fixity.Hashes{MD5: m5[:], SHA256: s256[:]}, int64(len(nb))
			if wrong {
				e.Metadata.Hashes.SHA256[0] ^= 0xff
			}
			if err := os.WriteFile(path, nb, 0o644); err != nil {
				t.Fatal(err)
			}
			rewritten++
		}
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	df.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dumpPath, dump.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if rewritten < len(hs.Cases)-2 {
		t.Fatalf("only %d of %d packages rewritten", rewritten, len(hs.Cases))
	}

	srv := serve(t, src)
	h := newHarness(t)
	cs := &countingSink{Sink: h.sink}
	rep := h.baseline(ctx, strings.Replace(hs.Dump, hostile.Base, srv.URL, 1), func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{cs}
		o.Limits = unzip.Limits{MaxEntries: hostile.MaxEntries, MaxRatio: hostile.MaxRatio}
		o.DisableRangeResync = true // a first sync: every package downloaded (and streamed)
	})
	held := h.held(ctx)
	kept := func(uri string) bool { return cs.put(uri) > 0 && !isGood(hs, uri) }
	checkHostile(t, hs, srv.URL, rep, held, kept)
	// The entries kept whose own failure is recorded: those the central
	// directory refused after they verified as they arrived.
	keptFailed := 0
	for _, c := range hs.Cases {
		for uri := range c.Failed {
			if _, ok := held[uri]; ok && kept(uri) {
				keptFailed++
			}
		}
		if c.Name == "symlink" || c.Name == "device" || c.Name == "duplicate-name" {
			for uri := range c.Failed {
				if !kept(uri) {
					t.Errorf("%s (%s) not delivered as it arrived: the rewritten corpus does not exercise it", uri, c.Name)
				}
			}
		}
	}
	keptAll := 0
	for uri := range held {
		if kept(uri) {
			keptAll++
		}
	}
	// Without streaming, the same packages end with the same failures and
	// skips (the same errors, word for word).
	h2 := newHarness(t)
	rep2 := h2.baseline(ctx, strings.Replace(hs.Dump, hostile.Base, srv.URL, 1), func(o *pipeline.Options) {
		o.Limits = unzip.Limits{MaxEntries: hostile.MaxEntries, MaxRatio: hostile.MaxRatio}
		o.DisableRangeResync, o.DisableStreaming = true, true
	})
	summary := func(rep *runreport.Report) []string {
		var out []string
		for _, f := range rep.Failures {
			out = append(out, "failure "+f.URI+" "+f.Stage+": "+f.Error)
		}
		for _, s := range rep.Skips {
			out = append(out, "skip "+s.Package+" "+s.Entry+": "+s.Reason)
		}
		slices.Sort(out)
		return out
	}
	if a, b := summary(rep), summary(rep2); !slices.Equal(a, b) {
		t.Errorf("streaming:\n%s\nwithout:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	t.Logf("%d resources delivered as they arrived and kept, %d of them refused by their central directory", keptAll, keptFailed)
	// The same figures, but for the entries kept: written, and not failed
	// (those whose package failed were never counted).
	want := rep2.Resources
	want.Written, want.Failed = want.Written+int64(keptAll), want.Failed-int64(keptFailed)
	if rep.Resources != want || rep.Packages != rep2.Packages {
		t.Errorf("streaming (%d kept, %d of them failed):\n%s\nwithout:\n%s", keptAll, keptFailed, rep.Summary(), rep2.Summary())
	}
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// TestStreamingReplacesHeldVersion: a streamed entry that verifies against
// its manifest entry replaces the version the destination holds as it
// arrives, once; when the central directory then refuses it, the new
// version stays, and the refusal is recorded.
func TestStreamingReplacesHeldVersion(t *testing.T) {
	ctx := context.Background()
	uri := func(n string) string { return "http://example.org/keep/" + n }
	v1 := []rawFile{
		{name: "a", body: []byte("version one of a"), method: zip.Deflate, listed: true, uri: uri("a")},
		{name: "b", body: []byte("b stays the same"), listed: true, uri: uri("b")},
	}
	v2 := []rawFile{
		{name: "a", body: []byte("version two of a, a symlink by the central directory"), mode: fs.ModeSymlink | 0o777, listed: true, uri: uri("a")},
		{name: "b", body: []byte("b stays the same"), listed: true, uri: uri("b")},
		{name: "c", body: []byte("c is new"), method: zip.Deflate, listed: true, uri: uri("c")},
	}
	dir := t.TempDir()
	writeDump(t, dir, map[string][]byte{"p.zip": buildRaw(t, v1)})
	srv := serve(t, dir)
	h := newHarness(t)
	cs := &countingSink{Sink: h.sink}
	opts := func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{cs}
		o.DisableRangeResync = true // download (and stream) the package again
	}
	if rep := h.baseline(ctx, srv.URL+"resourcedump.xml", opts); rep.Status != runreport.StatusOK || rep.Resources.Written != 2 {
		t.Fatalf("first run: %s", rep.Summary())
	}
	writeDump(t, dir, map[string][]byte{"p.zip": buildRaw(t, v2)})
	rep := h.baseline(ctx, srv.URL+"resourcedump.xml", opts)
	if rep.Resources.Written != 2 || rep.Resources.Unchanged != 1 || rep.Resources.Failed != 0 || len(rep.Failures) != 1 ||
		rep.Failures[0].URI != uri("a") || !strings.Contains(rep.Failures[0].Error, "symlink") || rep.Status != runreport.StatusPartial {
		t.Fatalf("second run: %s", rep.Summary())
	}
	held := h.held(ctx)
	if string(held[uri("a")]) != string(v2[0].body) || string(held[uri("c")]) != "c is new" {
		t.Fatalf("sink holds a=%q c=%q", held[uri("a")], held[uri("c")])
	}
	if cs.put(uri("a")) != 2 {
		t.Errorf("a put %d times, want twice (once a run)", cs.put(uri("a")))
	}
	if r := records(t, h.store)[uri("a")]; r.Outcome != state.OutcomeWritten || r.Length != int64(len(v2[0].body)) {
		t.Errorf("record of a: %+v", r)
	}
}
