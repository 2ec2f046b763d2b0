package pipeline_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/source"
)

// versioned is a planner whose records name their versions, some carrying
// their bodies, some to fetch from a location that is not their identity.
type versioned struct {
	records []versionedRecord
}

type versionedRecord struct {
	uri, version, body, location string
}

func (v *versioned) Plan(ctx context.Context, _ source.Task, _ source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	for _, r := range v.records {
		rec := &source.Record{URI: r.uri, Version: r.version, Location: r.location, ResourceSet: "set", Length: -1}
		if r.location == "" {
			rec.Length = int64(len(r.body))
			rec.Open = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(r.body)), nil }
		}
		if err := emit(ctx, source.Unit{Record: rec}); err != nil {
			return nil, err
		}
	}
	next := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	return []source.Checkpoint{{ResourceSet: "set", Next: next, Baseline: next}}, nil
}

// TestRecordVersions: a record's version is what "already held?" compares
// when the protocol names one — held at that version, a record is not
// written (nor fetched) again, even when its length alone could not tell;
// a new version is — and a record whose identity is not a URL is fetched
// from its location.
func TestRecordVersions(t *testing.T) {
	ctx := context.Background()
	var fetched atomic.Int32
	body := "body of b, version 1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		io.WriteString(w, body)
	}))
	defer srv.Close()
	h := newHarness(t)
	run := func(recs ...versionedRecord) *runreport.Report {
		t.Helper()
		return h.baseline(ctx, "versioned:", func(o *pipeline.Options) { o.Protocol = planned(&versioned{records: recs}) })
	}
	a1 := versionedRecord{uri: "urn:example:a", version: "2024-01-01", body: "<a>version 1</a>"}
	b1 := versionedRecord{uri: "urn:example:b", version: "7", location: srv.URL + "/files/b"}
	if rep := run(a1, b1); rep.Status != runreport.StatusOK || rep.Resources.Written != 2 {
		t.Fatalf("first: %s", rep.Summary())
	}
	if got := h.held(ctx); string(got["urn:example:b"]) != body || string(got["urn:example:a"]) != a1.body {
		t.Fatalf("held %q", got)
	}
	// The same versions again: nothing written, nothing fetched.
	before := fetched.Load()
	if rep := run(a1, b1); rep.Resources.Written != 0 || rep.Resources.Unchanged != 2 {
		t.Fatalf("same versions: %s", rep.Summary())
	}
	if n := fetched.Load() - before; n != 0 {
		t.Errorf("a record held at its version was fetched %d times", n)
	}
	// New versions, a of the same length: both written.
	a2 := versionedRecord{uri: a1.uri, version: "2024-02-01", body: "<a>version 2</a>"}
	b2 := versionedRecord{uri: b1.uri, version: "8", location: b1.location}
	body = "body of b, version 2"
	if rep := run(a2, b2); rep.Resources.Written != 2 {
		t.Fatalf("new versions: %s", rep.Summary())
	}
	if got := h.held(ctx); string(got["urn:example:a"]) != a2.body || string(got["urn:example:b"]) != body {
		t.Fatalf("held %q", got)
	}
}
