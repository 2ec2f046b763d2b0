package pipeline_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinkfault"
)

// TestFailureTextBounded: a sink (or a source) whose error quotes a
// megabyte of its own text does not have it kept whole, a copy a failed
// resource, in the report and the state: each failure keeps the first 4
// KiB, cut at a character's start and marked as cut.
func TestFailureTextBounded(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	if _, err := bench.Generate(ctx, bench.GenOptions{Dir: src, Resources: 6, Packages: 1, Seed: 7, MeanSize: 256}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, src)
	h := newHarness(t)
	huge := "rejected: " + strings.Repeat("é", 1<<19) // 1 MiB of two-byte characters
	faulty := sinkfault.New(h.sink, sinkfault.Options{
		Rules: []sinkfault.Rule{sinkfault.FailEvery(1, sinkfault.Permanent(huge))},
	})
	rep := h.baseline(ctx, srv.URL, func(o *pipeline.Options) { o.Sinks = []sink.Sink{faulty} })
	if len(rep.Failures) != 6 {
		t.Fatalf("%d failures reported, want 6: %s", len(rep.Failures), rep.Summary())
	}
	stored, _, err := h.store.Failures(ctx, rep.RunID, 100)
	if err != nil || len(stored) != 6 {
		t.Fatalf("%d failures stored (%v), want 6", len(stored), err)
	}
	texts := map[string]string{}
	for i, f := range rep.Failures {
		texts["reported "+f.URI] = rep.Failures[i].Error
	}
	for _, f := range stored {
		texts["stored "+f.URI] = f.Error
	}
	for where, s := range texts {
		if len(s) > 4096 || !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || !strings.Contains(s, "rejected: éé") {
			t.Errorf("%s: %d bytes, valid UTF-8 %v, ends %q; want the first 4096 bytes at most, whole characters, ending with …",
				where, len(s), utf8.ValidString(s), s[max(0, len(s)-8):])
		}
	}
}
