package pipeline_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/pipeline"
)

// TestMalformedDeleteRetryAtItsTime: a Change List's deletion of a.txt
// whose rs:md cannot be read (a malformed length), then a.txt's
// re-creation an hour later. The deletion is a failure of its own, and its
// retry is dated at the entry's own time, older than the re-creation: the
// next run, its range past the re-creation, does not delete a.txt, which
// the source holds.
func TestMalformedDeleteRetryAtItsTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	listSource(t, dir,
		map[string]string{"r/a.txt": "a v2", "r/e.txt": "e v1"},
		nil,
		[]*manifest.Entry{
			changeEntry(t, "r/a.txt", "", manifest.Deleted, "2016-01-02T00:00:00Z"),
			changeEntry(t, "r/a.txt", "a v2", manifest.Created, "2016-01-02T01:00:00Z"),
			changeEntry(t, "r/e.txt", "e v1", manifest.Created, "2016-01-02T03:00:00Z"),
		})
	p := filepath.Join(dir, "changelist.xml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	nb := bytes.Replace(b, []byte(`change="deleted"`), []byte(`change="deleted" length="x"`), 1)
	if bytes.Equal(nb, b) {
		t.Fatalf("no deleted entry to damage in %s", b)
	}
	os.WriteFile(p, nb, 0o644)
	srv := serve(t, dir)
	source := srv.URL + "capabilitylist.xml"
	u := func(p string) string { return srv.URL + p }

	h := newHarness(t)
	rep := h.baseline(ctx, source, nil)
	if rep.Resources.Failed != 0 {
		t.Fatalf("baseline: %s", rep.Summary())
	}
	rep = h.incremental(ctx, source, pipeline.Range{})
	if got := h.held(ctx); string(got[u("r/a.txt")]) != "a v2" {
		t.Fatalf("first incremental run: a.txt = %q, want a v2 (its re-creation is its latest change): %s", got[u("r/a.txt")], rep.Summary())
	}
	rep = h.incremental(ctx, source, pipeline.Range{})
	if got := h.held(ctx); string(got[u("r/a.txt")]) != "a v2" {
		t.Errorf("second incremental run deleted a.txt (held %q), though the source re-created it after the malformed deletion: %s", got[u("r/a.txt")], rep.Summary())
	}
}
