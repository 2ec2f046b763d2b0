package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

func TestDownloadParts(t *testing.T) {
	const partMin = 64 << 10
	const etag = `"p1"`
	type testCase struct {
		name    string
		size    int
		handler func(data, old []byte) handlerFunc
		badHash bool
		// unknownMax, when set, makes the length unknown and caps it there.
		unknownMax int64
		// on success
		parts    int // bounded part requests expected (0: one stream)
		resumes  int // -1: any (the parts race)
		restarts int
		// on failure
		class    errclass.Class
		is       error
		requests int
	}
	serve := func(data, _ []byte) handlerFunc {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			content(w, r, data, etag, time.Time{})
		}
	}
	tests := []testCase{
		{name: "below two parts' minimum: one stream", size: 2*partMin - 1, handler: serve},
		{name: "exactly two minimums: 4 parts", size: 2 * partMin, handler: serve, parts: 4},
		{name: "uneven last part", size: 2*partMin + 3, handler: serve, parts: 4},
		{name: "parts larger than the buffer", size: 4<<20 + 1, handler: serve, parts: 4},
		{
			name: "server ignores Range: one stream",
			size: 300_000,
			handler: func(data, _ []byte) handlerFunc {
				return func(n int, w http.ResponseWriter, r *http.Request) { full(w, data, etag) }
			},
		},
		{
			name: "only the probe is answered with 206: one stream again",
			size: 300_000,
			handler: func(data, _ []byte) handlerFunc {
				return func(n int, w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Range") == "bytes=0-0" {
						content(w, r, data, etag, time.Time{})
						return
					}
					full(w, data, etag)
				}
			},
			restarts: 1,
		},
		{
			name: "validator changes mid-way: one stream from byte 0",
			size: 300_000,
			handler: func(data, old []byte) handlerFunc {
				return func(n int, w http.ResponseWriter, r *http.Request) {
					if n < 3 { // the probe and two parts, cut
						content(cut(w, 10_000, false), r, old, `"p0"`, time.Time{})
						return
					}
					content(w, r, data, etag, time.Time{})
				}
			},
			resumes: -1, restarts: 1,
		},
		{
			name: "unknown length past the cap: fails after the probe",
			size: 300_000, handler: serve, unknownMax: 100_000,
			class: errclass.Permanent, is: ErrTooLarge, requests: 1,
		},
		{
			name: "declared hash does not match: permanent after one retry",
			size: 300_000, handler: serve, badHash: true,
			class: errclass.Permanent, is: fixity.ErrMismatch, requests: 2 * (1 + 4),
		},
	}
	// A part cut mid-body resumes from where it got to.
	const cutAt = 5_000
	tests = append(tests, testCase{
		name: "a part cut mid-body resumes",
		size: 300_000,
		handler: func(data, _ []byte) handlerFunc {
			var once atomic.Bool
			second := fmt.Sprintf("bytes=%d-", 75_000)
			return func(n int, w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.Header.Get("Range"), second) && !once.Swap(true) {
					w = cut(w, cutAt, false)
				}
				content(w, r, data, etag, time.Time{})
			}
		},
		parts: 5, resumes: 1,
	})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := testData(tc.size, 21)
			old := testData(tc.size, 22)
			sums := hashesOf(data)
			want := fixity.Expect{Length: int64(len(data)), Hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256}}
			if tc.badHash {
				want.Hashes.SHA256 = hashesOf(old).SHA256
			}
			if tc.unknownMax > 0 {
				want = fixity.Expect{Length: -1, Max: tc.unknownMax}
			}
			srv := newServer(t, tc.handler(data, old))
			o := testOptions()
			o.RangeParts, o.RangePartMin = 4, partMin
			c, _ := newTestClient(t, o)
			dst := tempFile(t, "pkg")

			var mu sync.Mutex
			var prog []int64
			res, err := c.DownloadProgress(context.Background(), srv.URL+"/p.zip", dst, want, func(n int64) {
				mu.Lock()
				prog = append(prog, n)
				mu.Unlock()
			})
			reqs := srv.requests()
			if tc.class != errclass.Unclassified {
				if err == nil || errclass.Of(err) != tc.class || !errors.Is(err, tc.is) {
					t.Fatalf("err = %v (%v), want %v wrapping %v", err, errclass.Of(err), tc.class, tc.is)
				}
				if len(reqs) != tc.requests {
					t.Errorf("%d requests, want %d", len(reqs), tc.requests)
				}
				return
			}
			if err != nil {
				t.Fatalf("download: %v", err)
			}
			got, err := os.ReadFile(dst.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("dst differs from the representation (%d bytes, want %d)", len(got), len(data))
			}
			if res.Bytes != int64(len(data)) || !bytes.Equal(res.Hashes.MD5, sums.MD5) || !bytes.Equal(res.Hashes.SHA256, sums.SHA256) {
				t.Errorf("result %d bytes %v, want %d bytes %v", res.Bytes, res.Hashes, len(data), sums)
			}
			if res.ETag != etag {
				t.Errorf("ETag %q, want %q", res.ETag, etag)
			}
			if (tc.resumes >= 0 && res.Resumes != tc.resumes) || res.Restarts != tc.restarts {
				t.Errorf("resumes %d restarts %d, want %d %d", res.Resumes, res.Restarts, tc.resumes, tc.restarts)
			}
			bounded := 0
			for _, h := range reqs {
				if r := h.Get("Range"); r != "" && r != "bytes=0-0" && !strings.HasSuffix(r, "-") {
					bounded++
					if h.Get("If-Range") == "" {
						t.Errorf("part request %s without If-Range", r)
					}
				}
			}
			if tc.restarts == 0 && bounded != tc.parts {
				t.Errorf("%d part requests, want %d", bounded, tc.parts)
			}
			if tc.name == "a part cut mid-body resumes" {
				resumed := fmt.Sprintf("bytes=%d-%d", 75_000+cutAt, 150_000-1)
				found := false
				for _, h := range reqs {
					found = found || h.Get("Range") == resumed
				}
				if !found {
					t.Errorf("no request for %s", resumed)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(prog) == 0 || prog[len(prog)-1] != int64(len(data)) {
				t.Fatalf("progress ends at %v, want %d", prog[max(0, len(prog)-1):], len(data))
			}
			if tc.restarts == 0 {
				for i := 1; i < len(prog); i++ {
					if prog[i] < prog[i-1] {
						t.Fatalf("progress went back from %d to %d", prog[i-1], prog[i])
					}
				}
			}
		})
	}
}
