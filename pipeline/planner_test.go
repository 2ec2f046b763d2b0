package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/source"
)

// bodies is a planner whose records carry their bodies, as a protocol
// whose responses hold the records (OAI-PMH) emits them.
type bodies struct {
	records []bodyRecord
	next    time.Time
}

type bodyRecord struct {
	uri, body string
	hashes    bool   // declare the body's md5 and sha-256
	lie       bool   // declare another body's hashes
	openErr   error  // the body cannot be opened
	fail      string // emitted as a failure met while planning instead
	sets      []string
	about     []string
}

var _ source.Planner = (*bodies)(nil)

func (b *bodies) Plan(ctx context.Context, _ source.Task, _ source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	for _, r := range b.records {
		if r.fail != "" {
			if err := emit(ctx, source.Unit{Failure: &source.Failure{URI: r.uri, ResourceSet: "set", Stage: "document", Err: errclass.Permanentf("%s", r.fail), Resource: true}}); err != nil {
				return nil, err
			}
			continue
		}
		rec := &source.Record{URI: r.uri, ResourceSet: "set", Length: int64(len(r.body)), ChangeTime: b.next, Type: "application/xml", Sets: r.sets, About: r.about}
		switch {
		case r.lie:
			rec.Hashes = sums([]byte(r.body + "!"))
		case r.hashes:
			rec.Hashes = sums([]byte(r.body))
		}
		rec.Open = func(context.Context) (io.ReadCloser, error) {
			if r.openErr != nil {
				return nil, r.openErr
			}
			return io.NopCloser(strings.NewReader(r.body)), nil
		}
		if err := emit(ctx, source.Unit{Record: rec}); err != nil {
			return nil, err
		}
	}
	return []source.Checkpoint{{ResourceSet: "set", Next: b.next, Baseline: b.next}}, nil
}

// TestRecordsWithBodies: the executor takes any planner (Options.Planner)
// and delivers records that carry their bodies like any other — verified
// against their declared hashes and length, a mismatch refused — records
// the planner's failures, and sets the checkpoint the planner returns only
// when no failure was temporary.
func TestRecordsWithBodies(t *testing.T) {
	next := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	good := []bodyRecord{
		{uri: "oai:example.org:1", body: "<dc>one</dc>", hashes: true},
		{uri: "oai:example.org:2", body: "<dc>two</dc>"},
		{uri: "oai:example.org:3", body: "<dc>three</dc>", lie: true},
		{uri: "oai:example.org:4", fail: "metadata not well-formed"},
	}
	for _, tt := range []struct {
		name       string
		records    []bodyRecord
		written    int64
		failed     int64
		checkpoint bool
	}{
		{"permanent failures only", good, 2, 2, true},
		{"a temporary failure", append(good[:2:2], bodyRecord{uri: "oai:example.org:5", body: "x", openErr: errclass.Retryablef("server busy")}), 2, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			p := &bodies{records: tt.records, next: next}
			rep := h.baseline(ctx, "oai-pmh:test", func(o *pipeline.Options) { o.Protocol = planned(p); o.SinkRetries = -1 })
			if rep.Resources.Written != tt.written || rep.Resources.Failed != tt.failed || rep.Status != runreport.StatusPartial {
				t.Fatalf("%s", rep.Summary())
			}
			if rep.Resources.Unverified != 1 {
				t.Errorf("unverified = %d, want 1 (the record without hashes)", rep.Resources.Unverified)
			}
			held := h.held(ctx)
			for _, r := range tt.records[:2] {
				if string(held[r.uri]) != r.body {
					t.Errorf("%s holds %q, want %q", r.uri, held[r.uri], r.body)
				}
			}
			if _, ok := held["oai:example.org:3"]; ok {
				t.Error("a record whose body does not match its hashes was delivered")
			}
			cp, ok, err := h.store.Checkpoint(ctx, "oai-pmh:test", "set")
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.checkpoint || (ok && !cp.Next.Equal(next)) {
				t.Errorf("checkpoint = %v (set %v), want set %v at %v", cp.Next, ok, tt.checkpoint, next)
			}
			// Again: the hashed record is held, nothing is written twice.
			rep = h.baseline(ctx, "oai-pmh:test", func(o *pipeline.Options) { o.Protocol = planned(p); o.SinkRetries = -1 })
			if rep.Resources.Unchanged < 1 {
				t.Errorf("second run: %s", rep.Summary())
			}
		})
	}
}

// metaSink records the sets and about containers each Put gives.
type metaSink struct {
	sink.Sink
	mu   sync.Mutex
	meta map[string]string
}

func (m *metaSink) Put(ctx context.Context, r *sink.Resource, body io.Reader) error {
	m.mu.Lock()
	m.meta[r.URI] = fmt.Sprint(r.Sets, r.About)
	m.mu.Unlock()
	return m.Sink.Put(ctx, r, body)
}

// TestRecordMetadataReachesSinks: what a protocol says of a record beside
// its body (its sets, its about containers) reaches every sink with it.
func TestRecordMetadataReachesSinks(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	p := &bodies{next: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), records: []bodyRecord{
		{uri: "oai:example.org:1", body: "<dc>one</dc>", sets: []string{"a", "b:c"}, about: []string{"<provenance/>"}},
		{uri: "oai:example.org:2", body: "<dc>two</dc>"},
	}}
	ms := &metaSink{Sink: h.sink, meta: map[string]string{}}
	opts := h.options("oai-pmh:test")
	opts.Protocol, opts.Sinks = planned(p), []sink.Sink{ms}
	if _, err := pipeline.Baseline(ctx, opts); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"oai:example.org:1": "[a b:c] [<provenance/>]", "oai:example.org:2": "[] []"}
	if !maps.Equal(ms.meta, want) {
		t.Errorf("the sinks were given %v, want %v", ms.meta, want)
	}
}
