package unpack

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// storedPackage is a ZIP of the files in order, every one stored with its
// sizes in its local header, the index first.
func storedPackage(t testing.TB, index string, files ...[2]string) []byte {
	return zipPackage(t, zip.Store, index, files...)
}

// deflatedPackage is storedPackage with its entries deflated, their sizes
// still in their local headers (as a package must be to be read as it
// arrives).
func deflatedPackage(t testing.TB, index string, files ...[2]string) []byte {
	return zipPackage(t, zip.Deflate, index, files...)
}

// zipPackage is a ZIP of the index and the files in order, each written
// with method and its sizes in its local header.
func zipPackage(t testing.TB, method uint16, index string, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range append([][2]string{{unzip.ManifestName, index}}, files...) {
		data := []byte(f[1])
		if method == zip.Deflate {
			var c bytes.Buffer
			fw, err := flate.NewWriter(&c, flate.BestSpeed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			data = c.Bytes()
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: f[0], Method: method, CRC32: crc32.ChecksumIEEE([]byte(f[1])),
			CompressedSize64: uint64(len(data)), UncompressedSize64: uint64(len(f[1]))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// logged keeps the attributes of the log records of one message.
type logged struct {
	mu    sync.Mutex
	msg   string
	attrs []map[string]slog.Value
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	if r.Message != l.msg {
		return nil
	}
	m := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
	l.mu.Lock()
	l.attrs = append(l.attrs, m)
	l.mu.Unlock()
	return nil
}

// readServed reads pkg, served with its hash, as a run would (streamed as it
// arrives), and returns what the host was given, how many times the package
// was requested, and the bytes the package's spool file took.
func readServed(t *testing.T, pkg []byte) (*recordingHost, int64, int64) {
	t.Helper()
	sum := sha256.Sum256(pkg)
	return readServedExpect(t, pkg, fixity.Expect{Length: int64(len(pkg)), Hashes: fixity.Hashes{SHA256: sum[:]}})
}

// readServedExpect is readServed with the package's expected length and
// hashes, as its dump gives them.
func readServedExpect(t *testing.T, pkg []byte, expect fixity.Expect) (*recordingHost, int64, int64) {
	t.Helper()
	h, gets, spooled := readServedWith(t, expect, served{pkg: pkg})
	if spooled < 0 {
		t.Fatal("no record \"package downloaded\" with the bytes spooled")
	}
	return h, gets, spooled
}

// served is how readServedWith serves a package and reads it.
type served struct {
	pkg  []byte
	opts *fetch.Options // the client's; nil: no retries
	// noStreaming downloads the package before reading it.
	noStreaming bool
	// want are the winners to apply (nil: every entry).
	want map[string]*source.Record
	// serve, when not nil, answers the n-th request (from 1) instead
	// of serving pkg.
	serve func(n int64, w http.ResponseWriter, r *http.Request)
	// ctx, when not nil, is the read's (else the test's).
	ctx context.Context
	// url and client, when set, read the package from a server the
	// caller runs, with its client (a fuzz target's, which must not take
	// a new port for each input).
	url    string
	client *fetch.Client
}

// fuzzWait bounds a fuzz input's reads: far more than they take.
const fuzzWait = 20 * time.Second

// readServedWith reads the package s serves as a run would, and returns
// what the host was given, how many times the package was requested, and
// the bytes the streamed download's spool file took (-1: not streamed).
func readServedWith(t *testing.T, expect fixity.Expect, s served) (*recordingHost, int64, int64) {
	t.Helper()
	var gets atomic.Int64
	if s.url == "" {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := gets.Add(1)
			if s.serve != nil {
				s.serve(n, w, r)
				return
			}
			http.ServeContent(w, r, "p.zip", time.Time{}, bytes.NewReader(s.pkg))
		}))
		defer srv.Close()
		s.url = srv.URL + "/p.zip"
	}
	if s.client == nil {
		opts := fetch.Options{Retries: -1}
		if s.opts != nil {
			opts = *s.opts
		}
		s.client = fetch.New(opts)
	}
	log := &logged{msg: "package downloaded"}
	rd := &Reader{Client: s.client, SpoolDir: t.TempDir(), NoStreaming: s.noStreaming, Log: slog.New(log),
		Downloads: make(chan struct{}, 1), Kept: NewSpool(2), Received: new(atomic.Int64), Progress: new(atomic.Int64)}
	h := &recordingHost{}
	j := source.Package{URL: s.url, Expect: expect, Index: lineIndex{}}
	ctx := t.Context()
	if s.ctx != nil {
		ctx = s.ctx
	}
	if err := rd.Read(ctx, j, s.want, h); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(rd.SpoolDir); len(left) != 0 {
		t.Errorf("%d files left in the spool directory", len(left))
	}
	slices.Sort(h.delivered)
	for _, a := range log.attrs { // the streamed download's (not a download again)
		if v, ok := a["spooled"]; ok {
			return h, gets.Load(), v.Int64()
		}
	}
	return h, gets.Load(), -1
}

// TestDirectSpoolsWhatItDoesNotClaim: a package streamed as it arrives
// writes to its spool file all but the data of the entries handed out from
// memory: the small entries' data is not spooled, a larger one's is, and
// every entry listed is delivered once, as it arrived.
func TestDirectSpoolsWhatItDoesNotClaim(t *testing.T) {
	small := bytes.Repeat([]byte("s"), 300<<10)
	big := bytes.Repeat([]byte("b"), maxClaim+1)
	pkg := storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/big big.bin\nhttp://example.org/c c.txt\n",
		[2]string{"a.txt", string(small)}, [2]string{"big.bin", string(big)}, [2]string{"c.txt", string(small)})
	h, gets, spooled := readServed(t, pkg)
	want := []string{"http://example.org/a stream", "http://example.org/big stream", "http://example.org/c stream"}
	if !slices.Equal(h.delivered, want) || len(h.failed) != 0 || h.done != 1 || gets != 1 {
		t.Fatalf("delivered %v, failed %+v, done %d, %d GETs; want %v, no failure, done once, one GET", h.delivered, h.failed, h.done, gets, want)
	}
	// Claimed: the local headers and data of a.txt and c.txt.
	var claimed int64
	sc := unzip.NewLocalScanner(bytes.NewReader(pkg), unzip.Limits{})
	for {
		e, err := sc.Next()
		if err != nil {
			break
		}
		if e.Name == "a.txt" || e.Name == "c.txt" {
			claimed += e.End() - e.HeaderOffset
		}
	}
	if spooled != int64(len(pkg))-claimed || claimed <= int64(2*len(small)) {
		t.Errorf("spooled %d bytes of %d; want all but the %d claimed", spooled, len(pkg), claimed)
	}
}

// TestDirectPathListedTwice: a path the index lists twice, under two URIs,
// is delivered for both; the second listing needs the entry's data, which
// went to the first from memory and is not on the spool, so the package is
// downloaded again for it.
func TestDirectPathListedTwice(t *testing.T) {
	pkg := storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/b b.txt\nhttp://example.org/a2 a.txt\n",
		[2]string{"a.txt", "alpha"}, [2]string{"b.txt", "bravo"})
	h, gets, _ := readServed(t, pkg)
	want := []string{"http://example.org/a stream", "http://example.org/a2 archive", "http://example.org/b stream"}
	if !slices.Equal(h.delivered, want) || len(h.failed) != 0 || h.done != 1 || gets != 2 {
		t.Fatalf("delivered %v, failed %+v, done %d, %d GETs; want %v, no failure, done once, two GETs", h.delivered, h.failed, h.done, gets, want)
	}
	// Without a digest of the package, the download again could be of
	// another version: the listing fails, temporarily, and nothing is
	// downloaded again.
	h, gets, _ = readServedExpect(t, pkg, fixity.Expect{Length: -1})
	want = []string{"http://example.org/a stream", "http://example.org/b stream"}
	if !slices.Equal(h.delivered, want) || len(h.failed) != 1 || h.failed[0].URI != "http://example.org/a2" || h.failed[0].Permanent || gets != 1 {
		t.Fatalf("without a digest: delivered %v, failed %+v, %d GETs; want %v, a2 failed temporarily, one GET", h.delivered, h.failed, gets, want)
	}
}

// TestHolesMet: a range meets the holes it shares a byte with.
func TestHolesMet(t *testing.T) {
	hs := []span{{10, 20}, {30, 40}}
	for _, tc := range []struct {
		start, end int64
		want       bool
	}{
		{0, 10, false}, {0, 11, true}, {19, 30, true}, {20, 30, false}, {25, 31, true}, {39, 50, true}, {40, 50, false}, {12, 15, true}, {0, 100, true},
	} {
		if got := meets(hs, tc.start, tc.end); got != tc.want {
			t.Errorf("[%d, %d): %v, want %v", tc.start, tc.end, got, tc.want)
		}
	}
	if meets(nil, 0, 100) {
		t.Error("no holes met")
	}
}

// feed writes chunks to t as a download would, a nil chunk meaning that
// the download starts over, then closes it with end.
func feed(t *tap, end error, chunks ...[]byte) {
	for _, c := range chunks {
		var err error
		if c == nil {
			err = t.Restart()
		} else {
			_, err = t.Write(c)
		}
		if err != nil {
			end = err
			break
		}
	}
	t.close(end)
}

func newTestDirect(t *testing.T, ctx context.Context) (*direct, *os.File) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "spool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return newDirect(ctx, newTap(ctx), f, &spoolProgress{}), f
}

// TestDirectRestart: bytes claimed, then spooled, then the download starts
// over: the spool file is emptied and written again in full, from byte 0,
// and the restart is seen by the entries (Leave).
func TestDirectRestart(t *testing.T) {
	ctx := t.Context()
	d, f := newTestDirect(t, ctx)
	first := bytes.Repeat([]byte("o"), 100)
	second := bytes.Repeat([]byte("n"), 150)
	go feed(d.t, nil, first[:40], first[40:], nil, second[:70], second[70:])
	c, err := d.claim(ctx, unzip.LocalEntry{DataOffset: 0, CompressedSize: 50})
	if err != nil || c == nil || !bytes.Equal(c.data, first[:50]) {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	c.release()
	if err := d.have(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := d.have(ctx, 101); !errors.Is(err, errRestarted) {
		t.Fatalf("have past the restart: %v, want errRestarted", err)
	}
	if err := d.drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, second) || !d.prog.wasRestarted() {
		t.Fatalf("spool file %q, restarted %v; want the second pass's bytes alone", got, d.prog.wasRestarted())
	}
}

// TestDirectHoles: the spool file holds what was not claimed at its offsets;
// a claimed entry, its local header and data, is a hole until a worker
// fills it (an entry whose failure is left to phase 2).
func TestDirectHoles(t *testing.T) {
	ctx := t.Context()
	d, f := newTestDirect(t, ctx)
	pkg := []byte("spooled|dir|header|claimed|rest")
	go feed(d.t, nil, pkg)
	if _, err := d.Seek(8, io.SeekCurrent); err != nil { // as the scanner skips
		t.Fatal(err)
	}
	// The header of an entry with no data (a directory), then the
	// header of the entry claimed: the first goes to the file.
	header := make([]byte, 11)
	if _, err := io.ReadFull(d, header); err != nil || string(header) != "dir|header|" {
		t.Fatalf("read %q, %v", header, err)
	}
	e := unzip.LocalEntry{HeaderOffset: 12, DataOffset: 19, CompressedSize: 7}
	c, err := d.claim(ctx, e)
	if err != nil || c == nil || string(c.header) != "header|" || string(c.data) != "claimed" {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	defer c.release()
	if err := d.drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if want := "spooled|dir|" + strings.Repeat("\x00", 14) + "|rest"; string(got) != want {
		t.Fatalf("spool file %q, want %q", got, want)
	}
	if d.spooled != int64(len(pkg))-14 {
		t.Errorf("spooled %d bytes, want %d", d.spooled, len(pkg)-14)
	}
	if !d.fill(&Streamed{local: e, header: c.header, data: c.data}) {
		t.Fatal("fill failed")
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, pkg) {
		t.Fatalf("spool file %q after the fill, want %q", got, pkg)
	}
}

// TestDirectWriteFails: a spool file that cannot be written is a fatal
// error, and stays one: the file lacks bytes from then on.
func TestDirectWriteFails(t *testing.T) {
	ctx := t.Context()
	path := t.TempDir() + "/spool"
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // read-only
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := newDirect(ctx, newTap(ctx), f, &spoolProgress{})
	go feed(d.t, nil, []byte("0123456789"))
	if err := d.have(ctx, 5); !errclass.IsFatal(err) {
		t.Fatalf("have: %v, want a fatal error", err)
	}
	if err := d.drain(ctx); !errclass.IsFatal(err) {
		t.Fatalf("drain: %v, want the fatal error again", err)
	}
}

// TestDirectClaimsBounded: claims outstanding hold at most maxClaimed bytes:
// a claim past that waits until one is released (here, gives up with its
// ctx); entries larger than maxClaim, or empty, are not claimed.
func TestDirectClaimsBounded(t *testing.T) {
	ctx := t.Context()
	d, _ := newTestDirect(t, ctx)
	chunk := make([]byte, maxClaim)
	n := maxClaimed/maxClaim + 2
	chunks := make([][]byte, n)
	for i := range chunks {
		chunks[i] = chunk
	}
	go feed(d.t, nil, chunks...)
	var releases []func()
	claim := func(ctx context.Context, at int64, size int64) error {
		c, err := d.claim(ctx, unzip.LocalEntry{HeaderOffset: at, DataOffset: at, CompressedSize: size})
		if err == nil && c == nil {
			return errors.New("not claimed")
		}
		if c != nil {
			releases = append(releases, c.release)
		}
		return err
	}
	var at int64
	for range maxClaimed / maxClaim {
		if err := claim(ctx, at, maxClaim); err != nil {
			t.Fatal(err)
		}
		at += maxClaim
	}
	waiting, cancel := context.WithCancel(ctx)
	cancel()
	if err := claim(waiting, at, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("claim past the bound: %v, want it to wait (context canceled)", err)
	}
	releases[0]()
	if err := claim(ctx, at, maxClaim); err != nil {
		t.Fatalf("claim after a release: %v", err)
	}
	at += maxClaim
	for _, size := range []int64{0, maxClaim + 1} {
		if c, err := d.claim(ctx, unzip.LocalEntry{HeaderOffset: at, DataOffset: at, CompressedSize: size}); c != nil || err != nil {
			t.Errorf("claim of %d bytes: %+v, %v; want not claimed", size, c, err)
		}
	}
	if err := d.drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryInAClaim: a local header that gives a larger compressed
// size than its entry has (the central directory gives the true one) lets
// phase 1 claim the bytes after the entry, up into the central directory,
// which then is not in the spool file. Phase 2 reads the directory from
// the package downloaded again (pinned to the first's digest): every entry
// is handed out, as when the package is downloaded then read (the entry
// whose header lies, verified by its digest, is also reported failed, as
// one whose local header disagrees with the directory).
func TestDirectoryInAClaim(t *testing.T) {
	index := "http://example.org/a a.txt\nhttp://example.org/b b.txt\n"
	pkg := deflatedPackage(t, index, [2]string{"a.txt", "alpha"}, [2]string{"b.txt", strings.Repeat("bravo ", 200)})
	name := []byte("a.txt")
	at := bytes.Index(pkg, append([]byte("PK\x03\x04"), pkg[4:26]...)) // the manifest's header: skip it
	for i := at + 4; i+30 < len(pkg); i++ {
		if bytes.Equal(pkg[i:i+4], []byte("PK\x03\x04")) && bytes.Equal(pkg[i+30:i+30+len(name)], name) {
			dir := bytes.LastIndex(pkg, []byte("PK\x01\x02"))
			data := i + 30 + len(name) + int(binary.LittleEndian.Uint16(pkg[i+28:]))
			binary.LittleEndian.PutUint32(pkg[i+18:], uint32(dir+20-data)) // into the directory
			at = -1
			break
		}
	}
	if at != -1 {
		t.Fatal("no local header of a.txt")
	}
	sum := sha256.Sum256(pkg)
	expect := fixity.Expect{Length: int64(len(pkg)), Hashes: fixity.Hashes{SHA256: sum[:]}}
	streamed, gets, _ := readServedWith(t, expect, served{pkg: pkg})
	downloaded, _, _ := readServedWith(t, expect, served{pkg: pkg, noStreaming: true})
	if streamed.done != 1 {
		t.Fatalf("streamed: failed %+v, done %d", streamed.failed, streamed.done)
	}
	for _, f := range streamed.failed {
		if f.URI != "http://example.org/a" {
			t.Errorf("streamed: failure %+v (a's, whose local header lies, may be reported)", f)
		}
	}
	if got, want := deliveredURIs(streamed), deliveredURIs(downloaded); !slices.Equal(got, want) || len(want) != 2 {
		t.Errorf("streamed delivered %v, downloaded %v", got, want)
	}
	if gets != 2 {
		t.Errorf("%d GETs of the package, want 2 (the second for its directory)", gets)
	}
}
