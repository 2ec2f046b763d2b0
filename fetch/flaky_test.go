package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// hangGrace bounds how long a test waits for a call that must return
// within a few stall timeouts; it is a bound on a condition, not a timing
// assertion.
const hangGrace = 10 * time.Second

// TestErrorBodyThatNeverComesIsGivenUp: a server that answers 503 (or
// any unusable status) with headers and a Content-Length, then sends no
// body bytes, does not hold Open: the error body's drain is given up
// after the stall timeout, and the 503 is a temporary failure.
func TestErrorBodyThatNeverComesIsGivenUp(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		select { // headers sent, body never comes
		case <-release:
		case <-r.Context().Done():
		}
	})
	o := testOptions()
	o.Retries = -1
	o.Timeout = 200 * time.Millisecond
	o.StallTimeout = 100 * time.Millisecond
	c, _ := newTestClient(t, o)
	done := make(chan error, 1)
	go func() {
		b, err := c.Open(context.Background(), srv.URL+"/doc")
		if b != nil {
			b.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errclass.IsRetryable(err) {
			t.Fatalf("Open = %v, want a retryable 503 error", err)
		}
	case <-time.After(hangGrace):
		close(release)
		err := <-done
		t.Fatalf("Open still blocked %v after a 503 whose body never came (Timeout %v, StallTimeout %v); returned %v once the server gave up",
			hangGrace, o.Timeout, o.StallTimeout, err)
	}
}

// TestRangeReaderDoesNotWaitPastItsSpan: a server that sends exactly the
// bytes a RangeReader asked, chunked, and then neither ends the body nor
// closes does not hold ReadAt: its look for a byte past the span is given
// up after the stall timeout.
func TestRangeReaderDoesNotWaitPastItsSpan(t *testing.T) {
	data := testData(1000, 3)
	const etag = `"v1"`
	release := make(chan struct{})
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Range", "bytes 0-999/1000")
		w.WriteHeader(http.StatusPartialContent) // no Content-Length: chunked
		w.Write(data)
		w.(http.Flusher).Flush()
		select { // the terminating chunk never comes
		case <-release:
		case <-r.Context().Done():
		}
	})
	o := testOptions()
	o.Retries = -1
	o.StallTimeout = 100 * time.Millisecond
	c, _ := newTestClient(t, o)
	ra := c.ReaderAt(context.Background(), srv.URL+"/p.zip", int64(len(data)), etag)
	done := make(chan error, 1)
	go func() {
		p := make([]byte, len(data))
		_, err := ra.ReadAt(p, 0)
		done <- err
	}()
	select {
	case <-done:
		// Either the bytes or a (stall) error: anything but a hang.
	case <-time.After(hangGrace):
		close(release)
		err := <-done
		t.Fatalf("ReadAt still blocked %v after the server sent every byte asked (StallTimeout %v); returned %v once the server gave up",
			hangGrace, o.StallTimeout, err)
	}
}

// TestPartsBandwidthWaitIsNotAStall: in a download in Range parts, the
// client's own wait for its bandwidth limit (--bwlimit), however longer
// than the stall timeout, is not a stall of the server: no part is
// resumed, nothing is downloaded again.
func TestPartsBandwidthWaitIsNotAStall(t *testing.T) {
	data := testData(192<<10, 5)
	const etag = `"v1"`
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		content(w, r, data, etag, time.Time{})
	})
	o := testOptions()
	o.RangeParts, o.RangePartMin = 2, 32<<10
	o.Bandwidth = 64 << 10 // burst 64 KiB: the remaining 128 KiB wait about 2 s
	o.StallTimeout = 50 * time.Millisecond
	c := New(o) // the real sleep: the throttle must actually wait
	t.Cleanup(c.opts.Transport.(*http.Transport).CloseIdleConnections)
	dst := tempFile(t, "pkg")
	res, err := c.Download(context.Background(), srv.URL+"/p.zip", dst, fixity.Expect{Length: int64(len(data))})
	got, _ := os.ReadFile(dst.Name())
	if err == nil && !bytes.Equal(got, data) {
		t.Fatalf("download succeeded with wrong bytes")
	}
	if err != nil || res.Resumes != 0 || res.Restarts != 0 {
		t.Fatalf("download err %v, %d resumes, %d restarts, %d requests; want no error and no resume: the server never stalled, only the client's own bandwidth wait did",
			err, res.Resumes, res.Restarts, len(srv.requests()))
	}
}

// TestRangeReaderBandwidthWaitIsNotAStall: the same for a RangeReader (a
// package read in place by Range): one request, every byte.
func TestRangeReaderBandwidthWaitIsNotAStall(t *testing.T) {
	data := testData(160<<10, 6)
	const etag = `"v1"`
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		content(w, r, data, etag, time.Time{})
	})
	o := testOptions()
	o.Bandwidth = 64 << 10
	o.StallTimeout = 50 * time.Millisecond
	c := New(o)
	t.Cleanup(c.opts.Transport.(*http.Transport).CloseIdleConnections)
	ra := c.ReaderAt(context.Background(), srv.URL+"/p.zip", int64(len(data)), etag)
	p := make([]byte, len(data))
	n, err := ra.ReadAt(p, 0)
	reqs := len(srv.requests())
	if err != nil || n != len(data) || reqs != 1 {
		t.Fatalf("ReadAt = %d, %v after %d requests; want all %d bytes in 1 request (only the client's bandwidth wait was long)",
			n, err, reqs, len(data))
	}
	if !bytes.Equal(p, data) {
		t.Fatal("wrong bytes")
	}
}

// TestPartsTooSlowIsNotResumed: a response under Options.LowSpeedLimit
// is a temporary failure wrapping ErrTooSlow, not resumed, in a download
// in Range parts as in one stream: a trickling server does not hold a
// part for one low-speed window after another.
func TestPartsTooSlowIsNotResumed(t *testing.T) {
	data := testData(128<<10, 7)
	const etag = `"v1"`
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		rng := r.Header.Get("Range")
		if rng == "bytes=0-0" || rng == "" {
			content(w, r, data, etag, time.Time{})
			return
		}
		// A part: trickle it, 4 KiB then a pause, so every read waits.
		start, end, ok := partRange(rng)
		if !ok || start > end {
			status(w, http.StatusRequestedRangeNotSatisfiable, "")
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Range", "bytes "+strconv.Itoa(start)+"-"+strconv.Itoa(end)+"/"+strconv.Itoa(len(data)))
		w.Header().Set("Content-Length", strconv.Itoa(end-start+1))
		w.WriteHeader(http.StatusPartialContent)
		for off := start; off <= end; off += 4096 {
			if _, err := w.Write(data[off:min(off+4096, end+1)]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	o := testOptions()
	o.RangeParts, o.RangePartMin = 2, 32<<10
	o.LowSpeedLimit = 1 << 30 // any wait for bytes is too slow
	o.LowSpeedTime = time.Millisecond
	c, _ := newTestClient(t, o)
	dst := tempFile(t, "pkg")
	res, err := c.Download(context.Background(), srv.URL+"/p.zip", dst, fixity.Expect{Length: int64(len(data))})
	if res.Resumes != 0 || err == nil || !errors.Is(err, ErrTooSlow) {
		t.Fatalf("download err %v, %d resumes, %d requests; want a temporary ErrTooSlow failure, not resumed (as a single stream ends)",
			err, res.Resumes, len(srv.requests()))
	}
}

// partRange parses "bytes=a-b".
func partRange(rng string) (start, end int, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(rng, "bytes="), "-")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !found || !strings.HasPrefix(rng, "bytes=") || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return x, y, true
}

// TestPartsCompletePartNotAskedAgain: a part whose last read filled it
// is written whole, even when that read was slow: it is never asked for
// again (with an inverted range, whose 416 would read as a changed
// representation and throw every part away).
func TestPartsCompletePartNotAskedAgain(t *testing.T) {
	data := testData(64<<10, 8)
	const etag = `"v1"`
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		rng := r.Header.Get("Range")
		start, end, ok := partRange(rng)
		if rng == "" || rng == "bytes=0-0" || !ok || start > end {
			content(w, r, data, etag, time.Time{})
			return
		}
		// A part, chunked: the headers, a pause, then the bytes at once
		// (so the first read of every response waits), and the end of the
		// body only once the client goes away.
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Range", "bytes "+strconv.Itoa(start)+"-"+strconv.Itoa(end)+"/"+strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusPartialContent)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(30 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Write(data[start : end+1])
		w.(http.Flusher).Flush()
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	o := testOptions()
	o.RangeParts, o.RangePartMin = 2, 16<<10
	o.LowSpeedLimit = 1 << 30 // a read that waits is too slow
	o.LowSpeedTime = time.Millisecond
	c, _ := newTestClient(t, o)
	dst := tempFile(t, "pkg")
	res, err := c.Download(context.Background(), srv.URL+"/p.zip", dst, fixity.Expect{Length: int64(len(data))})
	for i, h := range srv.requests() {
		t.Logf("req %d %q", i, h.Get("Range"))
		if s, e, ok := partRange(h.Get("Range")); ok && s > e {
			t.Errorf("request %d asks for the inverted range %q: a part already complete was requested again", i, h.Get("Range"))
		}
	}
	if res.Restarts != 0 {
		t.Errorf("download err %v, %d restarts (%d resumes): the parts written were discarded", err, res.Restarts, res.Resumes)
	}
}

// TestNotModifiedOnlyFromTheURLAsked: the conditional headers of
// DownloadIfChanged (the validators of the copy held for url) are not
// sent on along a redirect: when url now leads to another document, not
// modified since the date of the copy held, that document is read, not
// taken for the copy held.
func TestNotModifiedOnlyFromTheURLAsked(t *testing.T) {
	held := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC) // copy of /v1, fetched via /doc
	older := held.Add(-24 * time.Hour)                  // /v2, where /doc now leads
	v2 := []byte("<urlset>the new document</urlset>")
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/doc":
			http.Redirect(w, r, "/v2", http.StatusFound)
		case "/v2":
			w.Header().Set("Content-Type", "application/xml")
			http.ServeContent(w, r, "", older, bytes.NewReader(v2))
		default:
			http.NotFound(w, r)
		}
	})
	c, _ := newTestClient(t, testOptions())
	dst := tempFile(t, "doc")
	_, err := c.DownloadIfChanged(context.Background(), srv.URL+"/doc", dst, fixity.Expect{Length: -1},
		Validators{LastModified: held.Format(http.TimeFormat)})
	reqs := srv.requests()
	last := reqs[len(reqs)-1]
	if errors.Is(err, ErrNotModified) {
		t.Fatalf("DownloadIfChanged = %v: a 304 of %s (If-Modified-Since %q forwarded across the redirect) taken for the document held of %s/doc",
			err, last.Get("X-Test-Path"), last.Get("If-Modified-Since"), srv.URL)
	}
	got, _ := os.ReadFile(dst.Name())
	if err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("DownloadIfChanged = %v, %q; want the new document", err, got)
	}
}

// tempFile creates a file named name in a directory of t's, closed when t
// ends.
func tempFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
