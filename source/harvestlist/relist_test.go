package harvestlist_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/state"
)

// siteEntry is one document element of a list served by editableSite.
type siteEntry struct {
	scope, identifier, revision string
	doc                         string // the path of its documentURL under the site
}

// editableSite serves a harvest list whose entries a test may change between
// harvests, and the documents under /doc/ (their path as their body),
// counting the GETs of each.
type editableSite struct {
	srv     *httptest.Server
	mu      sync.Mutex
	entries []siteEntry
	gets    sync.Map // path → *atomic.Int64
}

func newEditableSite(t *testing.T, entries ...siteEntry) *editableSite {
	t.Helper()
	s := &editableSite{entries: entries}
	mux := http.NewServeMux()
	mux.HandleFunc("/harvestlist.xml", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<?xml version="1.0"?>`+"\n"+`<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">`+"\n")
		for _, e := range s.entries {
			fmt.Fprintf(w, "<document><docid><scope>%s</scope><identifier>%s</identifier><revision>%s</revision></docid>"+
				"<documentType>text/plain</documentType><documentURL>%s%s</documentURL></document>\n", e.scope, e.identifier, e.revision, s.srv.URL, e.doc)
		}
		io.WriteString(w, "</hrv:harvestList>\n")
	})
	mux.HandleFunc("/doc/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := s.gets.LoadOrStore(r.URL.Path, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "document "+r.URL.Path)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *editableSite) list() string { return s.srv.URL + "/harvestlist.xml" }

func (s *editableSite) set(entries ...siteEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = entries
}

func (s *editableSite) getsOf(path string) int64 {
	n, ok := s.gets.Load(path)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// TestRelistedAfterDeleteUnlisted: a document the list dropped is
// deleted with DeleteUnlisted; when the site lists it again (the same
// revision, or a higher one), the next harvest fetches and stores it
// again: the tombstone carries no change time that would make every later
// record of that docid "an older change".
func TestRelistedAfterDeleteUnlisted(t *testing.T) {
	for _, relistAt := range []string{"1", "2"} {
		t.Run("revision "+relistAt, func(t *testing.T) {
			a := siteEntry{"knb", "1", "1", "/doc/a.1"}
			b := siteEntry{"knb", "2", "1", "/doc/b.1"}
			s := newEditableSite(t, a, b)
			mirror, st := destination(t)
			harvest := func() *runreport.Report { return harvestDeletingUnlisted(t, s, mirror, st) }
			if rep := harvest(); rep.Resources.Written != 2 {
				t.Fatalf("first harvest: %s", rep.Summary())
			}
			s.set(a) // knb.2 dropped
			if rep := harvest(); rep.Resources.Deleted != 1 {
				t.Fatalf("after the drop: %s", rep.Summary())
			}
			b.revision, b.doc = relistAt, "/doc/b."+relistAt
			s.set(a, b) // knb.2 listed again
			rep := harvest()
			if _, err := mirror.Get(t.Context(), "knb.2"); err != nil || rep.Resources.Written != 1 {
				t.Errorf("knb.2 listed again at revision %s is not harvested (%d GETs of it): %s; in the sink: %v",
					relistAt, s.getsOf(b.doc), rep.Summary(), err)
			}
			if held, ok, _ := st.Resource(t.Context(), s.list(), "knb.2"); !ok || held.Deleted {
				t.Errorf("knb.2 in the state: %+v", held)
			}
		})
	}
}

// TestBrokenEntryKeepsItsDocument: "a document whose entry the site
// breaks is still named: its failure is reported, and it is neither 'no
// longer listed' nor deleted" (TestUnlisted), however its identifier is
// written: "0100" or "+100" is knb.100, the document held, in a broken
// entry as in a valid one.
func TestBrokenEntryKeepsItsDocument(t *testing.T) {
	for _, ident := range []string{"0100", "+100"} {
		t.Run(ident, func(t *testing.T) {
			good := siteEntry{"knb", ident, "1", "/doc/100.1"}
			s := newEditableSite(t, good)
			mirror, st := destination(t)
			harvest := func() *runreport.Report { return harvestDeletingUnlisted(t, s, mirror, st) }
			if rep := harvest(); rep.Resources.Written != 1 {
				t.Fatalf("first harvest: %s", rep.Summary())
			}
			if _, err := mirror.Get(t.Context(), "knb.100"); err != nil {
				t.Fatalf("knb.100 not held: %v", err)
			}
			// The site breaks the entry's revision: the list still names
			// the document.
			broken := good
			broken.revision = "1.1"
			s.set(broken)
			rep := harvest()
			if _, err := mirror.Get(t.Context(), "knb.100"); err != nil || rep.Resources.Deleted != 0 {
				t.Errorf("knb.100, still named by a broken entry, was deleted: %s; failures %+v", rep.Summary(), rep.Failures)
			}
		})
	}
}

// TestLowerRevisionAfterAFailure: a document never held, listed at
// revision 3 whose documentURL fails (404), then listed at revision 2
// (the site withdrew the broken revision): nothing of it is held, so
// revision 2 is fetched and stored; the failed revision 3 is not "the
// version 3 held".
func TestLowerRevisionAfterAFailure(t *testing.T) {
	s := newEditableSite(t, siteEntry{"knb", "7", "3", "/missing/7.3"})
	mirror, st := destination(t)
	rep, err := harvestOf(t, s.list(), mirror, st, nil)
	if err != nil || rep.Resources.Failed != 1 {
		t.Fatalf("first harvest: %v %s", err, rep.Summary())
	}
	s.set(siteEntry{"knb", "7", "2", "/doc/7.2"})
	rep, err = harvestOf(t, s.list(), mirror, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, gerr := mirror.Get(t.Context(), "knb.7"); gerr != nil || rep.Resources.Written != 1 {
		t.Errorf("knb.7 at revision 2, nothing of it held, is not harvested (%d GETs): %s %+v", s.getsOf("/doc/7.2"), rep.Summary(), rep.Skips)
	}
}

// harvestDeletingUnlisted harvests s's list into mirror and st with
// DeleteUnlisted.
func harvestDeletingUnlisted(t *testing.T, s *editableSite, mirror *fs.FS, st *state.Store) *runreport.Report {
	t.Helper()
	rep, err := harvestOf(t, s.list(), mirror, st, func(o *pipeline.Options) { o.DeleteUnlisted = true })
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
