package fetch

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

func hashesOf(b []byte) fixity.Hashes {
	m, s1, s256 := md5.Sum(b), sha1.Sum(b), sha256.Sum256(b)
	return fixity.Hashes{MD5: m[:], SHA1: s1[:], SHA256: s256[:]}
}

func TestDownload(t *testing.T) {
	data := testData(300_000, 8)
	old := testData(300_000, 9)
	sums := hashesOf(data)
	wantAll := fixity.Expect{Length: int64(len(data)), Hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256}}
	const etag = `"d1"`

	tests := []struct {
		name    string
		opts    func(*Options)
		handler handlerFunc
		want    fixity.Expect
		prefill []byte // dst content before the download
		// on success
		attempts, resumes, restarts int
		hashes                      fixity.Hashes
		// on failure
		class    errclass.Class
		is       error
		requests int
	}{
		{
			name: "length and hashes match",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data, etag, time.Time{})
			},
			want: wantAll, attempts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "nothing expected, sha-1 computed on request",
			opts: func(o *Options) { o.Compute = fixity.Compute{SHA1: true} },
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, data)
			},
			want: fixity.Expect{Length: -1}, attempts: 1, hashes: fixity.Hashes{SHA1: sums.SHA1},
		},
		{
			name: "reset mid-body, resumed",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 100_000, false)
				}
				content(w, r, data, etag, time.Time{})
			},
			want: wantAll, attempts: 2, resumes: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "server ignores Range",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					w = cut(w, 100_000, false)
				}
				w.Header().Set("Accept-Ranges", "bytes")
				full(w, data, "")
			},
			want: wantAll, attempts: 2, resumes: 1, restarts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "ETag changed mid-transfer: clean restart",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					content(cut(w, 100_000, false), r, old, `"d0"`, time.Time{})
					return
				}
				content(w, r, data, etag, time.Time{})
			},
			// The old prefix is longer than dst's final content would be if not truncated.
			want: wantAll, attempts: 3, resumes: 1, restarts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name:    "dst held older, longer content",
			prefill: bytes.Repeat([]byte("stale"), 100_000),
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data, etag, time.Time{})
			},
			want: wantAll, attempts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "ETag changes on every request: bounded restarts",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(cut(w, 100_000, false), r, data, fmt.Sprintf(`"e%d"`, n), time.Time{})
			},
			want:  wantAll,
			class: errclass.Retryable, is: ErrChanged, requests: 2 * (1 + 3),
		},
		{
			name: "hash mismatch once (bytes damaged in transit), then right",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					content(w, r, old, etag, time.Time{})
					return
				}
				content(w, r, data, etag, time.Time{})
			},
			want: wantAll, attempts: 2, restarts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "hash mismatch",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, old, etag, time.Time{})
			},
			want:  wantAll,
			class: errclass.Permanent, is: fixity.ErrMismatch, requests: 2,
		},
		{
			name: "Content-Length contradicts the expected length",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data[:1000], etag, time.Time{})
			},
			want:  wantAll,
			class: errclass.Permanent, is: fixity.ErrMismatch, requests: 2,
		},
		{
			name: "chunked body longer than expected",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, append(append([]byte(nil), data...), data...))
			},
			want:  wantAll,
			class: errclass.Permanent, is: fixity.ErrMismatch, requests: 2,
		},
		{
			name: "chunked body shorter than expected",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, data[:1000])
			},
			want:  wantAll,
			class: errclass.Permanent, is: fixity.ErrMismatch, requests: 2,
		},
		{
			name: "unknown length, body within Max",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, data)
			},
			want: fixity.Expect{Length: -1, Max: int64(len(data))}, attempts: 1,
		},
		{
			name: "Max does not apply to a declared length",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data, etag, time.Time{})
			},
			want:     fixity.Expect{Length: wantAll.Length, Hashes: wantAll.Hashes, Max: 1},
			attempts: 1, hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256},
		},
		{
			name: "unknown length, chunked body past Max: cut off, not retried",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				chunked(w, data)
			},
			want:  fixity.Expect{Length: -1, Max: 100_000},
			class: errclass.Permanent, is: ErrTooLarge, requests: 1,
		},
		{
			name: "unknown length, Content-Length past Max: fails before the body",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				content(w, r, data, etag, time.Time{})
			},
			want:  fixity.Expect{Length: -1, Max: 100_000},
			class: errclass.Permanent, is: ErrTooLarge, requests: 1,
		},
		{
			name: "404",
			handler: func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, http.StatusNotFound, "")
			},
			want:  wantAll,
			class: errclass.Permanent, is: &StatusError{}, requests: 1,
		},
	}
	// Each case downloads to a file (Download) and hands the bytes to a
	// Destination (DownloadTo).
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			name := tt.name
			if stream {
				name += "/to a destination"
			}
			t.Run(name, func(t *testing.T) {
				srv := newServer(t, tt.handler)
				o := testOptions()
				if tt.opts != nil {
					tt.opts(&o)
				}
				c, _ := newTestClient(t, o)
				path := filepath.Join(t.TempDir(), "dst")
				if err := os.WriteFile(path, tt.prefill, 0o600); err != nil {
					t.Fatal(err)
				}
				dst, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer dst.Close()

				var res Result
				mem := &memDest{b: append([]byte(nil), tt.prefill...)}
				if stream {
					res, err = c.DownloadTo(t.Context(), srv.URL+"/pkg.zip", mem, tt.want, nil)
				} else {
					res, err = c.Download(t.Context(), srv.URL+"/pkg.zip", dst, tt.want)
				}
				if tt.class != errclass.Unclassified {
					if errclass.Of(err) != tt.class {
						t.Fatalf("err = %v (class %v), want %v", err, errclass.Of(err), tt.class)
					}
					if se, ok := tt.is.(*StatusError); ok {
						if !errors.As(err, &se) {
							t.Errorf("err = %v, want a StatusError", err)
						}
					} else if !errors.Is(err, tt.is) {
						t.Errorf("err = %v, want it to wrap %v", err, tt.is)
					}
					if n := len(srv.requests()); n != tt.requests || res.Attempts != tt.requests {
						t.Errorf("server saw %d requests, Result.Attempts %d, want %d", n, res.Attempts, tt.requests)
					}
					return
				}
				if err != nil {
					t.Fatalf("Download: %v", err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if stream {
					got = mem.b
					// Once per pass; a resume answered in full continues
					// the pass (a restart in the Result, not of dst).
					if mem.restarts < 1 || mem.restarts > tt.restarts+1 {
						t.Errorf("destination restarted %d times, want 1 to %d (once per pass)", mem.restarts, tt.restarts+1)
					}
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("dst holds %d bytes, not the %d served", len(got), len(data))
				}
				if res.Bytes != int64(len(data)) || !res.Hashes.Equal(tt.hashes) {
					t.Errorf("Result bytes %d hashes %v, want %d %v", res.Bytes, res.Hashes, len(data), tt.hashes)
				}
				if res.Attempts != tt.attempts || res.Resumes != tt.resumes || res.Restarts != tt.restarts {
					t.Errorf("attempts/resumes/restarts = %d/%d/%d, want %d/%d/%d",
						res.Attempts, res.Resumes, res.Restarts, tt.attempts, tt.resumes, tt.restarts)
				}
				if s := c.Stats(); s.Restarts != int64(tt.restarts) || s.Resumes != int64(tt.resumes) {
					t.Errorf("stats = %+v", s)
				}
			})
		}
	}
}

// memDest is a Destination in memory.
type memDest struct {
	b        []byte
	restarts int
}

func (d *memDest) Write(p []byte) (int, error) {
	d.b = append(d.b, p...)
	return len(p), nil
}

func (d *memDest) Restart() error {
	d.b = d.b[:0]
	d.restarts++
	return nil
}

// TestDownloadConcurrent shares one client between goroutines (for -race)
// and checks the counters add up.
func TestDownloadConcurrent(t *testing.T) {
	data := testData(64<<10, 10)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		content(w, r, data, `"c"`, time.Time{})
	})
	c, _ := newTestClient(t, testOptions())
	want := fixity.Expect{Length: int64(len(data)), Hashes: fixity.Hashes{SHA256: hashesOf(data).SHA256}}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	dir := t.TempDir()
	for i := range workers {
		wg.Go(func() {
			f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			_, err = c.Download(t.Context(), srv.URL, f, want)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Requests != workers || s.BytesDownloaded != workers*int64(len(data)) {
		t.Fatalf("stats = %+v", s)
	}
}

func BenchmarkDownload(b *testing.B) {
	const size = 64 << 20
	block := testData(1<<20, 11)
	whole := bytes.Repeat(block, size/len(block))
	srv := newServer(b, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"bench"`)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range size / len(block) {
			if _, err := w.Write(block); err != nil {
				return
			}
		}
	})
	sums := hashesOf(whole)
	for _, bc := range []struct {
		name string
		want fixity.Expect
	}{
		{"length", fixity.Expect{Length: size}},
		{"md5+sha-256", fixity.Expect{Length: size, Hashes: fixity.Hashes{MD5: sums.MD5, SHA256: sums.SHA256}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := New(Options{})
			f, err := os.Create(filepath.Join(b.TempDir(), "dst"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(size)
			for b.Loop() {
				if _, err := c.Download(b.Context(), srv.URL, f, bc.want); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
