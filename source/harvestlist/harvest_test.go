package harvestlist_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/harvestlist"
	"github.com/rsharvest/rsharvest/state"
)

// destination is an fs mirror and a state store in a temporary directory.
func destination(t *testing.T) (*fs.FS, *state.Store) {
	t.Helper()
	work := t.TempDir()
	mirror, err := fs.New(filepath.Join(work, "m"), fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(t.Context(), filepath.Join(work, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return mirror, st
}

// harvestOf runs a harvest of the list at list into mirror and st, as the
// executor runs one; mod, when set, changes its options.
func harvestOf(t *testing.T, list string, mirror sink.Sink, st *state.Store, mod func(*pipeline.Options)) (*runreport.Report, error) {
	t.Helper()
	o := pipeline.Options{Source: list, Protocol: harvestlist.Protocol(), Sinks: []sink.Sink{mirror}, Store: st,
		Client: fetch.New(fetch.Options{Retries: -1, StallTimeout: 5 * time.Second}), SpoolDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&o)
	}
	return pipeline.Baseline(t.Context(), o)
}

// servedList generates a harvest list of n documents (nothing odd) and
// serves it through wrap; it returns the list's URL.
func servedList(t *testing.T, n int, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	dir := t.TempDir()
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), dir, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.URL + "harvestlist.xml"
}

// relay answers w with rec's status and headers (but its length) and body.
func relay(w http.ResponseWriter, rec *httptest.ResponseRecorder, body []byte) {
	for k, vs := range rec.Header() {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// TestHarvest: a harvest of a list through the executor fetches every
// document at its highest revision, fails the unreachable one and the
// element without a revision, skips the docid listed twice, keeps no copy
// of the list for a conditional request (what it named failed); once the
// site's revisions rose, the next harvest fetches only the documents
// whose revision rose, requests nothing of the others, and reports the
// one listed at a lower revision than held without applying it.
func TestHarvest(t *testing.T) {
	const n = 12
	srv, dir := site(t, n, 0)
	mirror, st := destination(t)
	list := srv.URL + "harvestlist.xml"
	harvest := func() *runreport.Report {
		t.Helper()
		rep, err := harvestOf(t, list, mirror, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := harvest()
	r := rep.Resources
	if r.Written != n-1 || r.Failed != 2 || r.Skipped != 1 || r.Deleted != 0 {
		t.Fatalf("first harvest: %s", rep.Summary())
	}
	for _, f := range rep.Failures {
		if f.URI != bench.HarvestListDocID(bench.HarvestListUnreachable) && f.URI != bench.HarvestListScope+".999" {
			t.Errorf("failure %+v", f)
		}
	}
	held, ok, err := st.Resource(t.Context(), list, bench.HarvestListDocID(3))
	if err != nil || !ok || held.Version != "1" {
		t.Fatalf("document 3 held: %+v %v %v", held, ok, err)
	}
	// The list named an element it could not use: its copy is not kept,
	// so that the next harvest reads the list itself.
	if _, ok, err := st.Document(t.Context(), list); err != nil || ok {
		t.Errorf("the list's copy kept (%v, %v), though an element it names failed", ok, err)
	}

	// The site moves on: every third document at revision 2, document 7
	// listed at revision 0.
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Round: 1, Seed: 1, Odd: true}); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for i := range n {
		p := "/docs/" + strings.TrimPrefix(bench.HarvestListDocID(i), bench.HarvestListScope+".") + ".1.xml"
		before[p] = srv.Handler.Requests(p)
	}
	rep = harvest()
	r = rep.Resources
	if r.Written != 3 || r.Unchanged != n-5 || r.Failed != 2 || r.Skipped != 2 {
		t.Fatalf("second harvest: %s", rep.Summary())
	}
	for p, k := range before {
		if got := srv.Handler.Requests(p); got != k {
			t.Errorf("%s requested again (%d → %d): held at its revision", p, k, got)
		}
	}
	lower := false
	for _, s := range rep.Skips {
		lower = lower || (s.Entry == bench.HarvestListDocID(bench.HarvestListLower) && strings.Contains(s.Reason, "listed at version 0, older than the version 1 held"))
	}
	if !lower {
		t.Errorf("the lower revision is not reported: %+v", rep.Skips)
	}
	if held, _, _ := st.Resource(t.Context(), list, bench.HarvestListDocID(bench.HarvestListLower)); held.Version != "1" {
		t.Errorf("document 7 held at revision %s, want 1 (the lower one not applied)", held.Version)
	}
	if held, _, _ := st.Resource(t.Context(), list, bench.HarvestListDocID(3)); held.Version != "2" {
		t.Errorf("document 3 held at revision %s, want 2", held.Version)
	}
}

// TestListCopyKept: a list read whole, all of whose documents were
// harvested, is kept for the next harvest's conditional request, which is
// answered 304 and reads the copy.
func TestListCopyKept(t *testing.T) {
	var answers atomic.Int64 // 304s to requests for the list
	list := servedList(t, 5, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if r.URL.Path == "/harvestlist.xml" && rec.Code == http.StatusNotModified {
				answers.Add(1)
			}
			relay(w, rec, rec.Body.Bytes())
		})
	})
	mirror, st := destination(t)
	for round, want := range []int64{5, 0} {
		rep, err := harvestOf(t, list, mirror, st, nil)
		if err != nil || rep.Status != runreport.StatusOK || rep.Resources.Written != want {
			t.Fatalf("harvest %d: %v, %s", round, err, rep.Summary())
		}
		if kept, ok, err := st.Document(t.Context(), list); err != nil || !ok || kept.ETag == "" {
			t.Fatalf("harvest %d: the list's copy %q, %v, %v; want it kept with its ETag", round, kept.ETag, ok, err)
		}
	}
	if got := answers.Load(); got != 1 {
		t.Errorf("%d answers 304, want 1: the second harvest's request for the list", got)
	}
}

// TestListCopyCutShort: a list served cut short (under the whole list's
// validators) fails the harvest and leaves no copy; a copy cut short kept
// earlier, read on a 304, fails the harvest and is forgotten, so that
// the next harvest asks for the list itself.
func TestListCopyCutShort(t *testing.T) {
	var cut atomic.Bool
	list := servedList(t, 5, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if r.URL.Path == "/harvestlist.xml" && rec.Code == http.StatusOK && cut.Load() {
				body = body[:len(body)/2]
			}
			relay(w, rec, body)
		})
	})
	mirror, st := destination(t)
	harvest := func() (*runreport.Report, error) { return harvestOf(t, list, mirror, st, nil) }
	var se *source.SourceError

	cut.Store(true)
	if _, err := harvest(); !errors.As(err, &se) {
		t.Fatalf("the list cut short: %v, want the source's error", err)
	}
	if _, ok, err := st.Document(t.Context(), list); err != nil || ok {
		t.Fatalf("a copy of the list cut short is kept (%v, %v)", ok, err)
	}

	// A copy cut short under the list's validators, as a version that
	// kept every copy could leave.
	cut.Store(false)
	if rep, err := harvest(); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("the list whole: %v", err)
	}
	kept, ok, err := st.Document(t.Context(), list)
	if err != nil || !ok {
		t.Fatalf("the list read whole is not kept (%v, %v)", ok, err)
	}
	kept.Body = kept.Body[:len(kept.Body)/2]
	if err := st.PutDocument(t.Context(), kept); err != nil {
		t.Fatal(err)
	}
	if _, err := harvest(); !errors.As(err, &se) {
		t.Fatalf("the copy cut short: %v, want the source's error", err)
	}
	if _, ok, err := st.Document(t.Context(), list); err != nil || ok {
		t.Errorf("the copy cut short is still kept (%v, %v) after it failed", ok, err)
	}
	if rep, err := harvest(); err != nil || rep.Status != runreport.StatusOK {
		t.Fatalf("after the copy cut short was forgotten: %v", err)
	}
}

// TestValidate: with --validate a document is stored only when it is
// well-formed XML with its root in its documentType's namespace; with a
// schema for that type, only when xmllint finds it valid too. Each one
// that is not is its own permanent failure, at stage "validate", with the
// validator's message and line; the rest are stored.
func TestValidate(t *testing.T) {
	const n = 12
	srv, _ := site(t, n, 0)
	xsd := filepath.Join(t.TempDir(), "eml.xsd")
	if err := os.WriteFile(xsd, []byte(bench.HarvestListSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		schemas map[string]string
		invalid map[int]string // document → what its failure says
	}{
		{"well-formed, in its namespace", nil, map[int]string{
			bench.HarvestListMalformed: "not well-formed XML", bench.HarvestListWrongRoot: "is not in the namespace " + bench.EMLNamespace}},
		{"and valid against a schema", map[string]string{bench.EMLNamespace: xsd}, map[int]string{
			bench.HarvestListMalformed: "not well-formed XML", bench.HarvestListWrongRoot: "is not in the namespace", bench.HarvestListNoTitle: "title"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mirror, st := destination(t)
			rep, err := pipeline.Baseline(t.Context(), pipeline.Options{Source: srv.URL + "harvestlist.xml", Protocol: harvestlist.Protocol(), Sinks: []sink.Sink{mirror}, Store: st,
				Client: fetch.New(fetch.Options{Retries: -1}), SpoolDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Validate: true, Schemas: tc.schemas})
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(n - 1 - len(tc.invalid)); rep.Resources.Written != want {
				t.Errorf("written %d, want %d:\n%s", rep.Resources.Written, want, rep.Summary())
			}
			failed := map[string]runreport.Failure{}
			for _, f := range rep.Failures {
				failed[f.URI] = f
			}
			for i, says := range tc.invalid {
				f, ok := failed[bench.HarvestListDocID(i)]
				if !ok || f.Stage != "validate" || !f.Permanent || !strings.Contains(f.Error, says) || !strings.Contains(f.Error, "line") {
					t.Errorf("document %d: failure %+v, want a permanent one at validate saying %q and its line", i, f, says)
				}
				if _, err := mirror.Get(t.Context(), bench.HarvestListDocID(i)); err == nil {
					t.Errorf("document %d is stored", i)
				}
			}
		})
	}
}

// TestUnlisted: documents the list no longer names stay held and are
// reported as no longer listed (seed 004 never deletes); with
// DeleteUnlisted they are removed from the sink and the state.
func TestUnlisted(t *testing.T) {
	const n = 10
	srv, dir := site(t, n, 0)
	mirror, st := destination(t)
	list := srv.URL + "harvestlist.xml"
	harvest := func(deleteUnlisted bool) *runreport.Report {
		t.Helper()
		rep, err := harvestOf(t, list, mirror, st, func(o *pipeline.Options) { o.DeleteUnlisted = deleteUnlisted })
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := harvest(false); rep.Resources.Written != n-1 {
		t.Fatalf("first harvest: %s", rep.Summary())
	}
	// The site drops its last two documents from the list.
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: n, Seed: 1, Odd: true, Drop: 2}); err != nil {
		t.Fatal(err)
	}
	gone := []string{bench.HarvestListDocID(n - 2), bench.HarvestListDocID(n - 1)}
	rep := harvest(false)
	unlisted := map[string]bool{}
	for _, s := range rep.Skips {
		if strings.HasPrefix(s.Reason, "no longer listed") {
			unlisted[s.Entry] = true
		}
	}
	if len(unlisted) != 2 || !unlisted[gone[0]] || !unlisted[gone[1]] || rep.Resources.Deleted != 0 {
		t.Fatalf("no longer listed: %v; %s", unlisted, rep.Summary())
	}
	for _, uri := range gone {
		if _, err := mirror.Get(t.Context(), uri); err != nil {
			t.Errorf("%s is no longer held: %v", uri, err)
		}
	}
	rep = harvest(true)
	if rep.Resources.Deleted != 2 {
		t.Fatalf("with --delete-unlisted: %s", rep.Summary())
	}
	for _, uri := range gone {
		if _, err := mirror.Get(t.Context(), uri); err == nil {
			t.Errorf("%s is still held", uri)
		}
		if r, ok, _ := st.Resource(t.Context(), list, uri); !ok || !r.Deleted {
			t.Errorf("%s in the state: %+v", uri, r)
		}
	}
	if rep := harvest(true); rep.Resources.Deleted != 0 || len(rep.Skips) != 1 { // the duplicate docid only
		t.Errorf("a harvest after: %s %+v", rep.Summary(), rep.Skips)
	}
	// A document whose entry the site breaks is still named: its failure
	// is reported, and it is neither "no longer listed" nor deleted.
	listFile := filepath.Join(dir, "harvestlist.xml")
	b, err := os.ReadFile(listFile)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "<identifier>102</identifier>\n      <revision>1</revision>", "<identifier>102</identifier>\n      <revision>one</revision>", 1)
	if broken == string(b) {
		t.Fatal("the list's entry of document 2 was not found")
	}
	if err := os.WriteFile(listFile, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = harvest(true)
	if rep.Resources.Deleted != 0 || rep.Resources.Failed != 3 {
		t.Errorf("with a broken entry: %s", rep.Summary())
	}
	if _, err := mirror.Get(t.Context(), bench.HarvestListDocID(2)); err != nil {
		t.Errorf("document 2, its entry broken, is no longer held: %v", err)
	}
}

// TestHarvestUnderFaults: served with transient faults on a third of the
// requests (resets, 503s, truncated bodies …), a harvest with retries
// gets every reachable document, byte for byte, as without them.
func TestHarvestUnderFaults(t *testing.T) {
	dir := t.TempDir()
	if err := bench.GenerateHarvestList(t.Context(), bench.HarvestListOptions{Dir: dir, Documents: 30, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	inj, err := bench.NewFaultInjector(bench.Faults{Seed: 7, Rate: 0.3, Kinds: bench.TransientFaultKinds()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), dir, "127.0.0.1:0", bench.ServeOptions{Wrap: inj.Wrap, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mirror, st := destination(t)
	rep, err := pipeline.Baseline(t.Context(), pipeline.Options{Source: srv.URL + "harvestlist.xml", Protocol: harvestlist.Protocol(), Sinks: []sink.Sink{mirror}, Store: st,
		Client:   fetch.New(fetch.Options{Retries: 8, BackoffInitial: time.Millisecond, BackoffMax: 10 * time.Millisecond, StallTimeout: 2 * time.Second}),
		SpoolDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Validate: true})
	if err != nil || rep.Status != runreport.StatusOK || rep.Resources.Written != 30 {
		t.Fatalf("%v; %s", err, rep.Summary())
	}
	if inj.Stats().Faulted == 0 {
		t.Fatal("no fault was injected")
	}
	for i := range 30 {
		rc, err := mirror.Get(t.Context(), bench.HarvestListDocID(i))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		want, _ := os.ReadFile(filepath.Join(dir, "docs", fmt.Sprintf("%d.%d.xml", 100+i, bench.HarvestListRevision(i, 0))))
		if !bytes.Equal(got, want) {
			t.Errorf("document %d differs from the site's", i)
		}
	}
}

// TestLongIdentifier: a document whose docid is longer than
// source.MaxURILength (a scope of 2 MB) is that document's permanent
// failure — shown cut, not asked for, nothing written for it — and the
// others are harvested.
func TestLongIdentifier(t *testing.T) {
	var docs atomic.Int64
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("/harvestlist.xml", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<hl:harvestList xmlns:hl="eml://ecoinformatics.org/harvestList">`)
		for i, scope := range []string{"knb", strings.Repeat("s", 2<<20), "knb"} {
			fmt.Fprintf(w, `<document><docid><scope>%s</scope><identifier>%d</identifier><revision>1</revision></docid>`+
				`<documentType>text/plain</documentType><documentURL>%sdoc/%d</documentURL></document>`, scope, i, base, i)
		}
		io.WriteString(w, `</hl:harvestList>`)
	})
	mux.HandleFunc("/doc/", func(w http.ResponseWriter, r *http.Request) {
		docs.Add(1)
		io.WriteString(w, "document "+r.URL.Path)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL + "/"
	mirror, st := destination(t)
	rep, err := harvestOf(t, base+"harvestlist.xml", mirror, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resources.Written != 2 || rep.Resources.Failed != 1 || docs.Load() != 2 {
		t.Fatalf("%s; %d documents asked for", rep.Summary(), docs.Load())
	}
	f := rep.Failures[0]
	if !f.Permanent || !strings.Contains(f.Error, "identifier too long") || len(f.URI) > 300 {
		t.Errorf("failure %+v", f)
	}
}
