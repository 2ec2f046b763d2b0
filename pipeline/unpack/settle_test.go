package unpack

import (
	"bytes"
	"crypto/sha256"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/source"
)

// servePackage answers a request for a package with pkg.
func servePackage(pkg []byte, w http.ResponseWriter, r *http.Request) {
	http.ServeContent(w, r, "p.zip", time.Time{}, bytes.NewReader(pkg))
}

// TestDirectTruncateFails: when the download starts over and the spool
// file cannot be emptied, the file still holds the first pass's bytes, and
// the second pass would be written at the wrong offsets: the error is
// fatal and sticky, so drain returns it too, as for a failed write
// (TestDirectWriteFails), however phase 1 took it.
func TestDirectTruncateFails(t *testing.T) {
	ctx := t.Context()
	// /dev/null takes writes but cannot be truncated.
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := newDirect(ctx, newTap(ctx), f, &spoolProgress{})
	go feed(d.t, nil, []byte("first"), nil, []byte("2nd"))
	if err := d.have(ctx, 5); err != nil {
		t.Fatal(err)
	}
	// Phase 1's next read meets the restart: the error goes to the
	// scanner, which follow's stop records as a reason and drops.
	if err := d.have(ctx, 6); !errclass.IsFatal(err) {
		t.Fatalf("have across the restart: %v, want a fatal error", err)
	}
	err = d.drain(ctx)
	if !errclass.IsFatal(err) {
		t.Fatalf("drain after the spool file could not be emptied: %v (pos %d, the second pass written at offset 5); want the fatal error again", err, d.pos)
	}
}

// TestDirectRefetchFailsTemporarily: a listing whose entry data went to
// another listing from memory is delivered from the package downloaded
// again. When that download fails (the server now serves another version,
// or nothing), the failure is not the listing's own: its bytes were in the
// package verified. It is temporary, so that it holds the set's
// checkpoint and the next run asks for the resource again.
func TestDirectRefetchFailsTemporarily(t *testing.T) {
	v1 := storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/b b.txt\nhttp://example.org/a2 a.txt\n",
		[2]string{"a.txt", "alpha"}, [2]string{"b.txt", "bravo"})
	v2 := storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/b b.txt\nhttp://example.org/a2 a.txt\n",
		[2]string{"a.txt", "ALPHA"}, [2]string{"b.txt", "BRAVO"})
	sum := sha256.Sum256(v1)
	expect := fixity.Expect{Length: int64(len(v1)), Hashes: fixity.Hashes{SHA256: sum[:]}}
	for _, tc := range []struct {
		name  string
		later func(w http.ResponseWriter, r *http.Request) // GETs after the first
	}{
		{"package changed since", func(w http.ResponseWriter, r *http.Request) { servePackage(v2, w, r) }},
		{"package gone since", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, gets, _ := readServedWith(t, expect, served{serve: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					servePackage(v1, w, r)
					return
				}
				tc.later(w, r)
			}})
			if gets < 2 {
				t.Fatalf("%d GETs: the package was not downloaded again", gets)
			}
			var a2 *Failure
			for i := range h.failed {
				if h.failed[i].URI == "http://example.org/a2" {
					a2 = &h.failed[i]
				}
			}
			if a2 == nil {
				t.Fatalf("delivered %v, failed %+v: want a2 failed", h.delivered, h.failed)
			}
			if a2.Permanent {
				t.Errorf("a2 failed permanently (%s): the download again failed, not a2; the failure must hold the checkpoint so that the next run delivers it", a2.Error)
			}
		})
	}
}

// TestStreamedWinnerNotInManifest: an incremental run applies the winners
// a manifest copy names; a winner the package's manifest.xml lacks is a
// failure of its own ("not in the package's manifest.xml"), which holds it
// for the next run, whether the package is streamed or downloaded then
// read, and even when phase 1 handed out every entry manifest.xml lists.
func TestStreamedWinnerNotInManifest(t *testing.T) {
	pkg := storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/b b.txt\n",
		[2]string{"a.txt", "alpha"}, [2]string{"b.txt", "bravo"})
	sum := sha256.Sum256(pkg)
	expect := fixity.Expect{Length: int64(len(pkg)), Hashes: fixity.Hashes{SHA256: sum[:]}}
	for _, tc := range []struct {
		name        string
		noStreaming bool
	}{
		{"downloaded then read", true},
		{"streamed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The copy lists a, b, then x; manifest.xml lists a and b.
			want := map[string]*source.Record{
				"http://example.org/a": {URI: "http://example.org/a", Seq: 0},
				"http://example.org/b": {URI: "http://example.org/b", Seq: 1},
				"http://example.org/x": {URI: "http://example.org/x", Seq: 2},
			}
			h, _, _ := readServedWith(t, expect, served{pkg: pkg, noStreaming: tc.noStreaming, want: want})
			if len(h.delivered) != 2 || h.done != 1 {
				t.Fatalf("delivered %v, done %d; want a and b, done once", h.delivered, h.done)
			}
			if len(h.failed) != 1 || h.failed[0].URI != "http://example.org/x" {
				t.Fatalf("failed %+v; want x failed: the winner is not in the package's manifest.xml", h.failed)
			}
		})
	}
}

// TestStreamedRestartSettles: the first pass of a download does not match
// the dump's digest and the second does (the package changed under the
// download), after phase 1 delivered a.txt from the first pass. Phase 2
// settles a.txt against the verified second version:
//
//   - moved: a.txt has the same bytes and digest in both, at another
//     offset (the manifest grew): it stays delivered, and no failure is
//     recorded (its first local header is not compared with the second
//     version's central directory);
//   - changed, no hash: a.txt has other bytes in the second version, and
//     the manifest gives only lengths, so the listings are equal: it is
//     delivered again from the verified package.
func TestStreamedRestartSettles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v1, v2 []byte
	}{
		{"moved",
			storedPackage(t, "http://example.org/a a.txt\n", [2]string{"a.txt", "alpha"}),
			storedPackage(t, "http://example.org/a a.txt\nhttp://example.org/b b.txt\n", [2]string{"a.txt", "alpha"}, [2]string{"b.txt", "bravo"})},
		{"changed, no hash",
			storedPackage(t, "http://example.org/a a.txt\n", [2]string{"a.txt", "alpha"}),
			storedPackage(t, "http://example.org/a a.txt\n", [2]string{"a.txt", "ALPHA"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256(tc.v2)
			// Length unknown, so that the first pass is read to its end and
			// its digest found wrong: the download starts over once.
			expect := fixity.Expect{Length: -1, Hashes: fixity.Hashes{SHA256: sum[:]}}
			h, gets, _ := readServedWith(t, expect, served{opts: &fetch.Options{Retries: 1}, serve: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					servePackage(tc.v1, w, r)
					return
				}
				servePackage(tc.v2, w, r)
			}})
			if gets != 2 {
				t.Fatalf("%d GETs, want 2 (a restart)", gets)
			}
			if !slices.Contains(h.delivered, "http://example.org/a stream") {
				t.Fatalf("delivered %v: a.txt was not delivered from the first pass; the test does not test what it means to", h.delivered)
			}
			for _, f := range h.failed {
				t.Errorf("failure %s: %s (permanent %v, kind %d)", f.URI, f.Error, f.Permanent, f.Kind)
			}
			if tc.name == "changed, no hash" && !slices.Contains(h.delivered, "http://example.org/a archive") {
				t.Errorf("delivered %v: a.txt, delivered from the first version, is not delivered again from the verified second version", h.delivered)
			}
		})
	}
}
