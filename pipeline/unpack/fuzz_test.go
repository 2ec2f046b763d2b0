package unpack

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/fixity"
)

// FuzzStreamedAgreesWithDownloaded reads a package, whatever its bytes,
// both ways a first load can: streamed as it arrives, and downloaded then
// read. The package matches its dump's digest, so when either way hands
// out the whole package without a failure, the other hands out the same
// entries, each once. Either way ends (no deadlock), calls Done at most
// once, and leaves nothing in the spool directory (readServedWith).
//
// Each input is two reads over loopback, some 4 ms under the fuzzer:
// CI runs fewer of them than of the parsers' targets.
//
//ci:fuzzcount 5000
func FuzzStreamedAgreesWithDownloaded(f *testing.F) {
	index := "http://example.org/a a.txt\nhttp://example.org/b b.txt\nhttp://example.org/c c.txt\n"
	files := [][2]string{{"a.txt", "alpha"}, {"b.txt", strings.Repeat("bravo ", 200)}, {"c.txt", ""}}
	f.Add(storedPackage(f, index, files...))
	f.Add(deflatedPackage(f, index, files...))
	f.Add(storedPackage(f, "http://example.org/a a.txt\nhttp://example.org/a2 a.txt\n", files[0]))
	f.Add(storedPackage(f, "http://example.org/a a.txt\n", files[0], [2]string{"extra.txt", "not listed"}))
	f.Add(storedPackage(f, "http://example.org/a a.txt\nhttp://example.org/x x.txt\n", files[0]))
	f.Add(storedPackage(f, "http://example.org/a a.txt\nhttp://example.org/a b.txt\n", files[0], files[1]))
	// One server and one client for every input: a server and
	// connections of their own would soon take every local port.
	var current atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		servePackage(*current.Load(), w, r)
	}))
	defer srv.Close()
	client := fetch.New(fetch.Options{Retries: -1})
	f.Fuzz(func(t *testing.T, pkg []byte) {
		current.Store(&pkg)
		sum := sha256.Sum256(pkg)
		expect := fixity.Expect{Length: int64(len(pkg)), Hashes: fixity.Hashes{SHA256: sum[:]}}
		ctx, cancel := context.WithTimeout(t.Context(), fuzzWait)
		defer cancel()
		streamed, _, _ := readServedWith(t, expect, served{ctx: ctx, url: srv.URL + "/p.zip", client: client})
		downloaded, _, _ := readServedWith(t, expect, served{ctx: ctx, url: srv.URL + "/p.zip", client: client, noStreaming: true})
		if ctx.Err() != nil {
			t.Fatalf("the reads did not end within %v", fuzzWait)
		}
		for _, h := range []*recordingHost{streamed, downloaded} {
			if h.done > 1 {
				t.Fatalf("done %d times", h.done)
			}
		}
		whole := func(h *recordingHost) bool { return h.done == 1 && len(h.failed) == 0 }
		if (whole(streamed) || whole(downloaded)) && !slices.Equal(deliveredURIs(streamed), deliveredURIs(downloaded)) {
			t.Fatalf("streamed: delivered %v, failed %+v, done %d\ndownloaded: delivered %v, failed %+v, done %d",
				streamed.delivered, streamed.failed, streamed.done, downloaded.delivered, downloaded.failed, downloaded.done)
		}
	})
}

// deliveredURIs are the URIs h was given, sorted.
func deliveredURIs(h *recordingHost) []string {
	var out []string
	for _, d := range h.delivered {
		uri, _, _ := strings.Cut(d, " ")
		out = append(out, uri)
	}
	slices.Sort(out)
	return out
}
