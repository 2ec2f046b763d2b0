package unpack

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/unzip"
)

// lineIndex is an index of this test's own kind: a line "URI PATH" per
// entry. The reader knows no protocol: any source.Index does.
type lineIndex struct{}

func (lineIndex) Read(r io.Reader, _ *slog.Logger) (source.Entries, error) {
	return &lineEntries{sc: bufio.NewScanner(r)}, nil
}

type lineEntries struct{ sc *bufio.Scanner }

func (e *lineEntries) Next() (*source.Record, error) {
	if !e.sc.Scan() {
		if err := e.sc.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	uri, path, _ := strings.Cut(e.sc.Text(), " ")
	return &source.Record{URI: uri, Path: path, Length: -1}, nil
}

// recordingHost records what a read hands it; each entry is done at once.
type recordingHost struct {
	mu        sync.Mutex
	delivered []string // "uri from" where from is "stream" or "archive"
	failed    []Failure
	skipped   []string
	done      int
}

var _ Host = (*recordingHost)(nil)

func (h *recordingHost) Deliver(ctx context.Context, e Entry) error {
	from := "stream"
	if e.Arch != nil {
		// Looked up, as the executor does: that marks it listed. A path
		// the archive refuses is the entry's failure, as there.
		if _, err := e.Arch.Lookup(e.Record.Path); err != nil {
			h.Fail(ctx, Failure{Failure: runreport.Failure{URI: e.Record.URI, Package: e.Package.URL, Stage: "unzip", Error: err.Error(), Permanent: true}, Kind: ResourceFailed})
			e.Done()
			return nil
		}
		from = "archive"
	}
	h.mu.Lock()
	h.delivered = append(h.delivered, e.Record.URI+" "+from)
	h.mu.Unlock()
	e.Done()
	return nil
}

func (h *recordingHost) Fail(_ context.Context, f Failure) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = append(h.failed, f)
}

func (h *recordingHost) Skip(_ context.Context, s runreport.Skip) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.skipped = append(h.skipped, s.Entry)
	return nil
}

func (h *recordingHost) Done(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done++
	return nil
}

// testPackage is a ZIP whose first entry is its index, listing a.txt and
// b.txt, with an entry the index does not list.
func testPackage(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range []struct{ name, body string }{
		{unzip.ManifestName, "http://example.org/a a.txt\nhttp://example.org/b b.txt\n"},
		{"a.txt", "alpha"},
		{"b.txt", "bravo"},
		{"extra.txt", "not listed"},
	} {
		// Stored, its sizes in its local header (no data descriptor), as
		// a package must be to be read as it arrives.
		n := uint64(len(f.body))
		w, err := zw.CreateRaw(&zip.FileHeader{Name: f.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE([]byte(f.body)), CompressedSize64: n, UncompressedSize64: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRead reads one package each way the reader has — streamed as it
// arrives, downloaded then read, by Range on a re-sync — and with a digest
// that does not match: the entries the index lists are handed out once
// each, the entry it does not list is skipped, and a package that does not
// verify is one failure of the package and no entry.
func TestRead(t *testing.T) {
	pkg := testPackage(t)
	sum := sha256.Sum256(pkg)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "p.zip", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), bytes.NewReader(pkg))
	}))
	defer srv.Close()
	good := fixity.Expect{Length: int64(len(pkg)), Hashes: fixity.Hashes{SHA256: sum[:]}}
	bad := good
	bad.Hashes.SHA256 = make([]byte, sha256.Size)
	for _, tc := range []struct {
		name                string
		noStreaming, resync bool
		expect              fixity.Expect
		from                string // how the entries were read; "" none
	}{
		{"streamed", false, false, good, "stream"},
		{"downloaded", true, false, good, "archive"},
		{"by range", true, true, good, "archive"},
		{"hash mismatch", true, false, bad, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := &Reader{Client: fetch.New(fetch.Options{Retries: -1}), Limits: unzip.Limits{}, SpoolDir: t.TempDir(),
				NoStreaming: tc.noStreaming, Resync: tc.resync, Log: slog.New(slog.DiscardHandler),
				Downloads: make(chan struct{}, 1), Kept: NewSpool(2), Received: new(atomic.Int64), Progress: new(atomic.Int64)}
			h := &recordingHost{}
			j := source.Package{URL: srv.URL + "/p.zip", Expect: tc.expect, Index: lineIndex{}}
			if err := rd.Read(context.Background(), j, nil, h); err != nil {
				t.Fatal(err)
			}
			if tc.from == "" {
				if len(h.failed) != 1 || h.failed[0].Kind != PackageFailed || h.failed[0].Stage != "download" || len(h.delivered) != 0 || h.done != 0 {
					t.Fatalf("failed %+v, delivered %v, done %d: want one failure of the package at download", h.failed, h.delivered, h.done)
				}
				return
			}
			slices.Sort(h.delivered)
			want := []string{"http://example.org/a " + tc.from, "http://example.org/b " + tc.from}
			if !slices.Equal(h.delivered, want) || len(h.failed) != 0 || h.done != 1 {
				t.Fatalf("delivered %v, failed %+v, done %d; want %v, no failure, done once", h.delivered, h.failed, h.done, want)
			}
			if !slices.Equal(h.skipped, []string{"extra.txt"}) {
				t.Errorf("skipped %v, want [extra.txt]", h.skipped)
			}
			if rd.Received.Load() == 0 {
				t.Error("no bytes counted received")
			}
		})
	}
}
