package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// TestNoSpliceWithoutStrongValidator: the resource changes between
// the first attempt and the resume, keeping its length and its weak ETag
// (or having no validator at all). With no digest listed, Download must
// not deliver the first version's prefix followed by the second version's
// rest: it must restart (delivering one whole version) or fail.
func TestNoSpliceWithoutStrongValidator(t *testing.T) {
	v1 := testData(200_000, 21)
	v2 := testData(200_000, 22)
	const cutAt = 70_000
	tests := []struct {
		name string
		h    handlerFunc
	}{
		{
			name: "weak ETag, Accept-Ranges: resumed by 206",
			h: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					content(cut(w, cutAt, false), r, v1, `W/"w1"`, time.Time{})
					return
				}
				content(w, r, v2, `W/"w1"`, time.Time{})
			},
		},
		{
			name: "weak ETag, no Accept-Ranges: whole body again, prefix discarded",
			h: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					full(cut(w, cutAt, false), v1, `W/"w1"`)
					return
				}
				full(w, v2, `W/"w1"`)
			},
		},
		{
			name: "no validator: whole body again, prefix discarded",
			h: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					full(cut(w, cutAt, false), v1, "")
					return
				}
				full(w, v2, "")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.h)
			c, _ := newTestClient(t, testOptions())
			dst := tempFile(t, "pkg")
			res, err := c.Download(t.Context(), srv.URL+"/pkg.zip", dst, fixity.Expect{Length: -1})
			if err != nil {
				return // failing is acceptable
			}
			got, _ := os.ReadFile(dst.Name())
			if bytes.Equal(got, v1) || bytes.Equal(got, v2) {
				return
			}
			spliced := len(got) == len(v1) && bytes.Equal(got[:cutAt], v1[:cutAt]) && bytes.Equal(got[cutAt:], v2[cutAt:])
			t.Fatalf("Download delivered %d bytes (result %+v) that are neither version (spliced v1[:%d]+v2[%d:]: %v)",
				len(got), res, cutAt, cutAt, spliced)
		})
	}
}

// TestRestartSkipIsProgress: a server that ignores Range sends the whole
// representation again after an interruption; Body discards the prefix
// already returned. Reads of that prefix bring bytes, and are progress,
// not empty reads: a prefix that takes more than maxEmptyReads reads (a
// caller reading 4 KiB at a time here) is read through.
func TestRestartSkipIsProgress(t *testing.T) {
	data := testData(1_000_000, 23)
	const etag = `"s1"`
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			full(cut(w, 600_000, false), data, etag)
			return
		}
		full(w, data, etag) // ignores Range
	})
	c, _ := newTestClient(t, testOptions())
	b, err := c.Open(t.Context(), srv.URL+"/big")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got bytes.Buffer
	_, err = io.CopyBuffer(struct{ io.Writer }{&got}, struct{ io.Reader }{b}, make([]byte, 4096))
	if err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read %d of %d bytes, err %v (requests %d, stats %+v)", got.Len(), len(data), err, len(srv.requests()), c.Stats())
	}
}

// TestRedirectToNonHTTPIsPermanent: a non-HTTP URL reached by a redirect
// is a permanent error, as one given to Open is: not retried.
func TestRedirectToNonHTTPIsPermanent(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://127.0.0.1/pkg.zip", http.StatusFound)
	})
	c, _ := newTestClient(t, testOptions())
	_, err := c.Open(t.Context(), srv.URL+"/pkg.zip")
	if err == nil {
		t.Fatal("Open succeeded")
	}
	if errclass.Of(err) != errclass.Permanent || len(srv.requests()) != 1 {
		t.Fatalf("redirect to ftp://: class %v after %d requests (%v); want permanent after 1",
			errclass.Of(err), len(srv.requests()), err)
	}
}

// TestUnaskedNotModifiedAfterRedirect: the conditional headers are
// dropped on a redirect ("a 304 answers for the URL asked alone"), so a
// 304 from the redirect target, which was not asked conditionally, is not
// taken for ErrNotModified (the caller would use its copy of the URL
// asked).
func TestUnaskedNotModifiedAfterRedirect(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/doc":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			w.WriteHeader(http.StatusNotModified) // unasked
		}
	})
	c, _ := newTestClient(t, testOptions())
	dst := tempFile(t, "doc")
	_, err := c.DownloadIfChanged(t.Context(), srv.URL+"/doc", dst, fixity.Expect{Length: -1},
		Validators{ETag: `"held"`})
	reqs := srv.requests()
	last := reqs[len(reqs)-1]
	if errors.Is(err, ErrNotModified) {
		t.Fatalf("a 304 from %s, asked with If-None-Match %q (none), is taken for ErrNotModified of /doc: %v",
			last.Get("X-Test-Path"), last.Get("If-None-Match"), err)
	}
}

// TestPartsResultValidators: a download in Range parts reports the
// response's ContentEncoding, ETag and LastModified, as one stream does
// (the caller records them for the next conditional request).
func TestPartsResultValidators(t *testing.T) {
	data := testData(300_000, 24)
	lm := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		content(w, r, data, `"p1"`, lm)
	})
	o := testOptions()
	o.RangeParts, o.RangePartMin = 4, 64<<10
	c, _ := newTestClient(t, o)
	dst := tempFile(t, "pkg")
	res, err := c.Download(t.Context(), srv.URL+"/pkg.zip", dst, fixity.Expect{Length: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.requests()) < 3 {
		t.Fatalf("not downloaded in parts: %d requests", len(srv.requests()))
	}
	if res.ETag != `"p1"` || res.LastModified != lm.Format(http.TimeFormat) {
		t.Fatalf("Result ETag %q, LastModified %q; want %q, %q (the response's)", res.ETag, res.LastModified, `"p1"`, lm.Format(http.TimeFormat))
	}
}

// TestBodyCutBeforeFirstByteIsARetry: a response whose body breaks before
// its first byte is sent again: a retry, counted in Stats.Retries and told
// to OnRetry.
func TestBodyCutBeforeFirstByteIsARetry(t *testing.T) {
	data := testData(10_000, 26)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			full(cut(w, 0, false), data, `"c1"`)
			return
		}
		content(w, r, data, `"c1"`, time.Time{})
	})
	o := testOptions()
	var told atomic.Int64
	o.OnRetry = func(Retry) { told.Add(1) }
	c, _ := newTestClient(t, o)
	_, got, err := readAll(t.Context(), c, srv.URL+"/r")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	s := c.Stats()
	if s.Requests != 2 {
		t.Fatalf("requests %d, want 2", s.Requests)
	}
	if s.Retries+s.Resumes+s.Restarts == 0 || told.Load() == 0 {
		t.Fatalf("the second request is counted nowhere: stats %+v, OnRetry told %d times", s, told.Load())
	}
}

// TestDrainedBytesCounted: Stats.BytesDownloaded counts the body of an
// error answer, read (drained) and discarded before the retry, as it does
// every body byte received.
func TestDrainedBytesCounted(t *testing.T) {
	errBody := bytes.Repeat([]byte("x"), 50_000)
	data := []byte("0123456789")
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Content-Length", strconv.Itoa(len(errBody)))
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write(errBody)
			return
		}
		full(w, data, "")
	})
	c, _ := newTestClient(t, testOptions())
	_, got, err := readAll(context.Background(), c, srv.URL+"/r")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	if s := c.Stats(); s.BytesDownloaded < int64(len(errBody)+len(data)) {
		t.Fatalf("BytesDownloaded %d; %d body bytes were received (%d drained from the 503)",
			s.BytesDownloaded, len(errBody)+len(data), len(errBody))
	}
}

// TestRestartSkipOverTLS: the same as TestRestartSkipIsProgress with
// Download's own 256 KiB buffer, over https, where a read returns at most
// one TLS record (16 KiB): a download from a server that ignores Range,
// interrupted past 1.6 MB, completes.
func TestRestartSkipOverTLS(t *testing.T) {
	data := testData(3_000_000, 27)
	const etag = `"t1"`
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			full(cut(w, 2_000_000, false), data, etag)
			return
		}
		full(w, data, etag) // ignores Range
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	o := testOptions()
	o.Transport = srv.Client().Transport
	c, _ := newTestClient(t, o)
	dst := tempFile(t, "pkg")
	res, err := c.Download(t.Context(), srv.URL+"/pkg.zip", dst, fixity.Expect{Length: int64(len(data))})
	if err != nil {
		t.Fatalf("Download: %v (requests %d, result %+v)", err, n.Load(), res)
	}
}

// endlessEmptyDeflate is a gzip member whose DEFLATE stream is an endless
// run of empty stored blocks: bytes arrive without end, and nothing comes
// out of them. It fails with errEndless after limit bytes, to bound the
// test.
type endlessEmptyDeflate struct {
	n, limit int64
}

var errEndless = errors.New("test source: limit reached")

func (e *endlessEmptyDeflate) Read(p []byte) (int, error) {
	header := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	block := []byte{0, 0, 0, 0xff, 0xff} // BFINAL 0, stored, LEN 0
	if e.n >= e.limit {
		return 0, errEndless
	}
	k := 0
	for k < len(p) {
		var b byte
		if e.n < int64(len(header)) {
			b = header[e.n]
		} else {
			b = block[(e.n-int64(len(header)))%int64(len(block))]
		}
		p[k] = b
		k++
		e.n++
	}
	return k, nil
}

// TestEndlessCompressedDocumentCutOff: an endless compressed stream that
// inflates to nothing (empty stored blocks) is cut off near the document
// cap by the bytes sent, not read until the source gives up (256 times the
// cap here).
func TestEndlessCompressedDocumentCutOff(t *testing.T) {
	const max = 64 << 10
	src := &endlessEmptyDeflate{limit: 256 * max}
	r, err := DecodeDocument(src, "http://example.org/oai?verb=ListRecords", "gzip", max)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("after %d compressed bytes (cap %d) that decompress to nothing: %v; want ErrTooLarge", src.n, max, err)
	}
}

// TestPartsProbeFailureRetriesOnce: with RangeParts, a Download whose
// probe fails temporarily, its retries spent, fails so, and is not made
// again at once in one stream with fresh retries: a server answering 503
// is asked Retries+1 times, and one that answers 429 with a Retry-After
// past MaxRetryAfter (EndOnLongRetryAfter) is not asked again at once.
func TestPartsProbeFailureRetriesOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		code       int
		retryAfter string
		want       int
	}{
		{name: "503 storm", code: http.StatusServiceUnavailable, want: 4},
		{name: "429 Retry-After an hour", code: http.StatusTooManyRequests, retryAfter: "3600", want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				status(w, tc.code, tc.retryAfter)
			})
			o := testOptions() // Retries 3
			o.RangeParts, o.RangePartMin = 4, 64<<10
			o.EndOnLongRetryAfter = true
			c, sl := newTestClient(t, o)
			dst := tempFile(t, "pkg")
			_, err := c.Download(t.Context(), srv.URL+"/pkg.zip", dst, fixity.Expect{Length: -1})
			if err == nil {
				t.Fatal("Download succeeded")
			}
			if got := len(srv.requests()); got != tc.want {
				t.Fatalf("server asked %d times (waits %v, Range of each: %v), want %d: %v",
					got, sl.get(), ranges(srv.requests()), tc.want, err)
			}
		})
	}
}

func ranges(reqs []http.Header) []string {
	var s []string
	for _, h := range reqs {
		s = append(s, strconv.Quote(h.Get("Range")))
	}
	return s
}
