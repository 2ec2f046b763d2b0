package pipeline_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
)

// TestSourceFailureNotRepeatedPerSink: with several sinks, a failure of
// the source (a 404 of the resource) is not a sink's: the resource cannot
// be given to any sink, so the sinks after the first do not fetch it again
// (each with its own retries).
func TestSourceFailureNotRepeatedPerSink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// x is listed but not on disk: the server answers 404.
	listSource(t, dir, map[string]string{"r/y.txt": "y v1"},
		[]*manifest.Entry{listEntry(t, "r/x.txt", "x v1"), listEntry(t, "r/y.txt", "y v1")}, nil)
	var xGets atomic.Int64
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/r/x.txt") {
				xGets.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	source := srv.URL + "capabilitylist.xml"
	h := newHarness(t)
	other, err := fs.New(filepath.Join(h.dir, "second"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	third, err := fs.New(filepath.Join(h.dir, "third"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := h.baseline(ctx, source, func(o *pipeline.Options) {
		o.Sinks = []sink.Sink{h.sink, other, third}
		o.SinkNames = []string{"mirror", "second", "third"}
	})
	t.Logf("%s", rep.Summary())
	for _, f := range rep.Failures {
		t.Logf("failure: %s %s: %s", f.URI, f.Stage, f.Error)
	}
	if n := xGets.Load(); n != 1 {
		t.Errorf("the resource the source answers 404 for was asked %d times with 3 sinks; want 1 (a source's failure is not a sink's)", n)
	}
}
