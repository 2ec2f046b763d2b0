package harvestlist_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/harvestlist"
	"github.com/rsharvest/rsharvest/source/protocols"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// site generates a harvest list of n documents at round with what real
// lists hold (bench.HarvestListOptions.Odd), and serves it.
func site(t *testing.T, n, round int) (*bench.Server, string) {
	t.Helper()
	dir := t.TempDir()
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Round: round, Seed: 1, Odd: true}); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, dir
}

// planner reads documents with a plain client, as the executor would.
func planner(t *testing.T) *harvestlist.Planner {
	c := fetch.New(fetch.Options{Retries: -1})
	return &harvestlist.Planner{ScratchDir: t.TempDir(), OpenDocument: func(ctx context.Context, url string) (io.ReadCloser, error) {
		return c.Open(ctx, url)
	}}
}

// TestPlannerConformance runs the planner conformance suite on the
// harvest list's planner: every docid once, at its highest revision; the
// element without a revision failed; the docid listed twice skipped once;
// an incremental task the same; what is not a harvest list refused.
func TestPlannerConformance(t *testing.T) {
	srv, _ := site(t, 12, 0)
	var docids []string
	for i := range 12 {
		docids = append(docids, bench.HarvestListDocID(i))
	}
	list := srv.URL + "harvestlist.xml"
	sourcetest.Run(t, []sourcetest.Case{
		{Name: "baseline", Planner: planner(t), Task: source.Task{Source: list, Mode: source.Baseline},
			Records: docids, Failures: []string{bench.HarvestListScope + ".999"}, Skips: []string{bench.HarvestListDocID(0)}, Sets: []string{""}},
		{Name: "incremental: the list read whole", Planner: planner(t), Task: source.Task{Source: list, Mode: source.Incremental},
			Records: docids, Failures: []string{bench.HarvestListScope + ".999"}, Skips: []string{bench.HarvestListDocID(0)}, Sets: []string{""}},
		{Name: "not a harvest list", Planner: planner(t), Task: source.Task{Source: srv.URL + "docs/101.1.xml", Mode: source.Baseline}, Err: harvestlist.ErrNotHarvestList},
	})
}

// TestRecords: a record is the docid at its highest revision, fetched
// from its documentURL; revisions order as numbers.
func TestRecords(t *testing.T) {
	srv, _ := site(t, 12, 2)
	recs := map[string]*source.Record{}
	if _, err := planner(t).Plan(t.Context(), source.Task{Source: srv.URL + "harvestlist.xml", Mode: source.Baseline}, sourcetest.Holdings{},
		func(_ context.Context, u source.Unit) error {
			if u.Record != nil {
				recs[u.Record.URI] = u.Record
			}
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	r := recs[bench.HarvestListDocID(3)]
	if r == nil || r.Version != "3" || r.Location != srv.URL+"docs/103.3.xml" || r.Listed != srv.URL+"harvestlist.xml" {
		t.Errorf("record of document 3: %+v", r)
	}
	if r := recs[bench.HarvestListDocID(0)]; r == nil || r.Version != "3" {
		t.Errorf("document 0, listed twice: %+v, want revision 3", r)
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{{"2", "10", -1}, {"10", "2", 1}, {"7", "7", 0}, {"x", "1", -1}, {"1", "x", 1}} {
		if got := harvestlist.CompareRevisions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareRevisions(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestAuto: --protocol auto finds a harvest list by its root element; a
// site's root or a ResourceSync document's name is not asked.
func TestAuto(t *testing.T) {
	srv, _ := site(t, 3, 0)
	c := fetch.New(fetch.Options{Retries: -1})
	for _, tc := range []struct{ url, want string }{
		{srv.URL + "harvestlist.xml", harvestlist.Name},
		{srv.URL + "docs/101.1.xml", "resourcesync"},
		{srv.URL, "resourcesync"},
	} {
		p, err := protocols.All().Choose(t.Context(), "auto", c, tc.url)
		if err != nil || p.Name != tc.want {
			t.Errorf("auto for %s: %s, %v; want %s", tc.url, p.Name, err, tc.want)
		}
	}
	for _, u := range []string{"http://h/", "http://h/.well-known/resourcesync", "http://h/capabilitylist.xml", "http://h/rs/changedump-0001.xml"} {
		if harvestlist.MayBeList(u) {
			t.Errorf("MayBeList(%s)", u)
		}
	}
}

// endlessList is a harvest list that never ends: a document after
// another; once it has given stopAfter of them it calls stop (an
// operator's SIGTERM, as the run's context ends), and goes on.
type endlessList struct {
	n, stopAfter int
	stop         func()
	buf          []byte
}

func (l *endlessList) Read(b []byte) (int, error) {
	if len(l.buf) == 0 {
		if l.n == 0 {
			l.buf = []byte(`<?xml version="1.0"?><hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">`)
		}
		l.buf = fmt.Appendf(l.buf, `<document><docid><scope>s</scope><identifier>%d</identifier><revision>1</revision></docid>`+
			`<documentType>eml://ecoinformatics.org/eml-2.1.1</documentType><documentURL>http://127.0.0.1:1/%d.xml</documentURL></document>`, l.n, l.n)
		if l.n++; l.n == l.stopAfter {
			l.stop()
		}
	}
	n := copy(b, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *endlessList) Close() error { return nil }

// TestPlanStopsWhenCancelled: the run's context ending while a list is
// read (a list that never ends, so only the context can stop it) ends the
// plan with the context's error, having read no further than a little
// past the moment it ended.
func TestPlanStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	list := &endlessList{stopAfter: 1000, stop: cancel}
	p := &harvestlist.Planner{ScratchDir: t.TempDir(), OpenDocument: func(context.Context, string) (io.ReadCloser, error) { return list, nil }}
	_, err := p.Plan(ctx, source.Task{Source: "http://127.0.0.1:1/harvestlist.xml", Mode: source.Baseline}, nil, func(context.Context, source.Unit) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Plan = %v, want the context's error", err)
	}
	if list.n > 2*list.stopAfter {
		t.Errorf("the list was read to document %d, %d past the context's end", list.n, list.n-list.stopAfter)
	}
}
