package fetch

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestProbe(t *testing.T) {
	data := testData(1000, 1)
	lm := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		h         handlerFunc
		ranges    bool
		validator string
	}{
		{"etag", func(_ int, w http.ResponseWriter, r *http.Request) { content(w, r, data, `"v1"`, time.Time{}) }, true, `"v1"`},
		{"weak etag, last-modified", func(_ int, w http.ResponseWriter, r *http.Request) { content(w, r, data, `W/"v1"`, lm) }, true, lm.Format(http.TimeFormat)},
		{"ignores range", func(_ int, w http.ResponseWriter, _ *http.Request) { full(w, data, `"v1"`) }, false, `"v1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.h)
			c, _ := newTestClient(t, testOptions())
			size, v, ranges, err := c.Probe(context.Background(), srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			if size != int64(len(data)) || v != tc.validator || ranges != tc.ranges {
				t.Errorf("Probe = %d, %q, %v; want %d, %q, %v", size, v, ranges, len(data), tc.validator, tc.ranges)
			}
		})
	}
	t.Run("404", func(t *testing.T) {
		srv := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { status(w, http.StatusNotFound, "") })
		c, _ := newTestClient(t, testOptions())
		_, _, _, err := c.Probe(context.Background(), srv.URL)
		if errclass.Of(err) != errclass.Permanent {
			t.Errorf("err = %v (%v), want permanent", err, errclass.Of(err))
		}
	})
}

func TestRangeReaderReads(t *testing.T) {
	data := testData(300<<10, 2)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			status(w, http.StatusServiceUnavailable, "") // retried
			return
		}
		content(w, r, data, `"v1"`, time.Time{})
	})
	c, _ := newTestClient(t, testOptions())
	ra := c.ReaderAt(context.Background(), srv.URL, int64(len(data)), `"v1"`)
	for _, rd := range []struct{ off, n int }{{0, 10}, {5, 100}, {70 << 10, 200 << 10}, {len(data) - 7, 7}, {1000, 64 << 10}} {
		p := make([]byte, rd.n)
		k, err := ra.ReadAt(p, int64(rd.off))
		if err != nil || k != rd.n || !bytes.Equal(p, data[rd.off:rd.off+rd.n]) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; bytes equal %v", rd.n, rd.off, k, err, bytes.Equal(p[:k], data[rd.off:rd.off+k]))
		}
	}
	p := make([]byte, 10)
	if k, err := ra.ReadAt(p, int64(len(data)-4)); k != 4 || err != io.EOF {
		t.Errorf("read past the end = %d, %v; want 4, EOF", k, err)
	}
	for _, h := range srv.requests() {
		if h.Get("If-Range") != `"v1"` || h.Get("User-Agent") != "rsharvest/test" || h.Get("Range") == "" {
			t.Errorf("request headers %v", h)
		}
	}
	if st := c.Stats(); st.Retries != 1 || st.BytesDownloaded < int64(len(data)/2) {
		t.Errorf("stats %+v", st)
	}
}

func TestRangeReaderRefuses(t *testing.T) {
	data := testData(200<<10, 3)
	other := testData(200<<10, 4)
	tests := []struct {
		name string
		h    handlerFunc
		is   error
	}{
		{"ignores range", func(_ int, w http.ResponseWriter, _ *http.Request) { full(w, data, `"v1"`) }, ErrNoRange},
		{"etag changes", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				content(w, r, data, `"v1"`, time.Time{})
				return
			}
			content(w, r, other, `"v2"`, time.Time{}) // If-Range fails: 200
		}, ErrChanged},
		{"length changes", func(n int, w http.ResponseWriter, r *http.Request) {
			content(w, r, data[:len(data)-n], "", time.Time{})
		}, ErrChanged},
		{"wrong range", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-9/%d", len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:10])
		}, ErrChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.h)
			c, _ := newTestClient(t, testOptions())
			validator := `"v1"`
			if tc.name == "length changes" {
				validator = ""
			}
			ra := c.ReaderAt(context.Background(), srv.URL, int64(len(data)), validator)
			p := make([]byte, 100)
			var err error
			for _, off := range []int64{0, 100 << 10} {
				if _, err = ra.ReadAt(p, off); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.is) || errclass.Of(err) != errclass.Retryable {
				t.Fatalf("err = %v (%v), want retryable %v", err, errclass.Of(err), tc.is)
			}
			if ra.Err() == nil {
				t.Error("Err() = nil after a failed fetch")
			}
			if n := len(srv.requests()); n > 2 {
				t.Errorf("%d requests: such failures must not be retried", n)
			}
		})
	}
}

// TestRangeReaderZip reads a ZIP's central directory and one entry through
// a RangeReader: the block cache keeps the request count small.
func TestRangeReaderZip(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 2000 {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("resources/some/longish/path/entry-%05d.txt", i), Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(testData(2000, byte(i)))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { content(w, r, data, `"z"`, time.Time{}) })
	c, _ := newTestClient(t, testOptions())
	ra := c.ReaderAt(context.Background(), srv.URL, int64(len(data)), `"z"`)
	zr, err := zip.NewReader(ra, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2000 {
		t.Fatalf("%d entries", len(zr.File))
	}
	cd := len(srv.requests())
	f := zr.File[1234]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := f.Open()
			if err != nil {
				t.Error(err)
				return
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil || !bytes.Equal(b, testData(2000, byte(1234%256))) {
				t.Errorf("entry: %v", err)
			}
		}()
	}
	wg.Wait()
	total := len(srv.requests())
	st := c.Stats()
	t.Logf("archive %d bytes; central directory: %d requests; entry: %d; bytes %d", len(data), cd, total-cd, st.BytesDownloaded)
	// The directory is ~130 KB: a handful of growing spans.
	if cd > 6 {
		t.Errorf("%d requests to read the central directory", cd)
	}
	if total-cd > 2 {
		t.Errorf("%d requests to read one entry", total-cd)
	}
	if st.BytesDownloaded > int64(len(data))/8 {
		t.Errorf("downloaded %d of %d bytes", st.BytesDownloaded, len(data))
	}
}

func TestRangeReaderContext(t *testing.T) {
	data := testData(1000, 5)
	srv := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { content(w, r, data, `"v"`, time.Time{}) })
	c, _ := newTestClient(t, testOptions())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ra := c.ReaderAt(ctx, srv.URL, int64(len(data)), `"v"`)
	if _, err := ra.ReadAt(make([]byte, 10), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
