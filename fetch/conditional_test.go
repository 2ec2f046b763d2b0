package fetch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
)

// TestDownloadIfChanged: a download conditional on the validators of the
// copy held answers ErrNotModified, with nothing written, when the server
// says 304 — with an ETag, and with only Last-Modified as plain static
// servers send — and downloads the new version when it changed.
func TestDownloadIfChanged(t *testing.T) {
	mod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tt := range []struct {
		name string
		etag bool
	}{{"etag and last-modified", true}, {"last-modified only", false}} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte("version 1 of a document")
			s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if tt.etag {
					w.Header().Set("ETag", `"`+string(body[8:9])+`"`)
				}
				http.ServeContent(w, r, "", mod, bytes.NewReader(body))
			})
			c := New(Options{Retries: 1, BackoffInitial: time.Millisecond})
			f, err := os.CreateTemp(t.TempDir(), "dl")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res, err := c.Download(context.Background(), s.URL, f, fixity.Expect{Length: -1})
			if err != nil {
				t.Fatal(err)
			}
			held := Validators{ETag: res.ETag, LastModified: res.LastModified}
			if held.LastModified == "" || (held.ETag != "") != tt.etag {
				t.Fatalf("validators %+v", held)
			}
			res, err = c.DownloadIfChanged(context.Background(), s.URL, f, fixity.Expect{Length: -1}, held)
			if !errors.Is(err, ErrNotModified) || !errclass.IsPermanent(err) || res.Bytes != 0 {
				t.Fatalf("unchanged: %+v, %v; want ErrNotModified and no bytes", res, err)
			}
			if st, _ := f.Stat(); st.Size() != 0 {
				t.Errorf("dst holds %d bytes after a 304", st.Size())
			}
			hdr := s.requests()[1]
			if hdr.Get("If-Modified-Since") == "" || (hdr.Get("If-None-Match") != "") != tt.etag {
				t.Errorf("conditional request headers: %v", hdr)
			}
			body = []byte("version 2 of a document")
			mod = mod.Add(time.Hour)
			res, err = c.DownloadIfChanged(context.Background(), s.URL, f, fixity.Expect{Length: -1}, held)
			if err != nil || res.Bytes != int64(len(body)) {
				t.Fatalf("changed: %+v, %v", res, err)
			}
			if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, body) {
				t.Errorf("dst holds %q", got)
			}
		})
	}
}
