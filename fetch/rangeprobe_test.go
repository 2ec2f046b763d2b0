package fetch

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/rsharvest/rsharvest/fixity"
)

// TestBrokenRangeFallsBackToOneStream: a server whose Range handling fails
// (500 to any Range request) but serves plain GETs is downloaded in one
// stream: the probe's failure is the Range request's, not the resource's.
func TestBrokenRangeFallsBackToOneStream(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			status(w, http.StatusInternalServerError, "")
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Write(body)
	})
	o := testOptions()
	o.RangeParts, o.RangePartMin = 4, 64<<10
	c, _ := newTestClient(t, o)
	dst := tempFile(t, "pkg")
	if _, err := c.Download(t.Context(), srv.URL+"/pkg.zip", dst, fixity.Expect{Length: -1}); err != nil {
		t.Fatalf("Download: %v (server asked %d times, Range of each: %v)", err, len(srv.requests()), ranges(srv.requests()))
	}
	dst.Seek(0, io.SeekStart)
	got, _ := io.ReadAll(dst)
	if !bytes.Equal(got, body) {
		t.Errorf("downloaded %d bytes, want %d", len(got), len(body))
	}
}
