package harvestlist_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
)

// listSite serves a harvest list whose entries (docid, revision, path)
// the test sets, and documents from a map of path → body, through
// http.ServeContent with one modification time for every document (a site
// whose files were written together, as a tarball or a generator leaves
// them): a conditional GET is answered as any static file server answers
// it.
type listSite struct {
	srv     *httptest.Server
	mu      sync.Mutex
	entries []listEntry
	docs    map[string]string
	docType string
	gets    map[string][]string // path → If-Modified-Since of each GET
}

type listEntry struct{ scope, identifier, revision, path string }

var listModTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func newListSite(t *testing.T, docType string, docs map[string]string, entries ...listEntry) *listSite {
	t.Helper()
	s := &listSite{entries: entries, docs: docs, docType: docType, gets: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/harvestlist.xml", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0"?>` + "\n" + `<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">` + "\n")
		for _, e := range s.entries {
			fmt.Fprintf(&b, "<document><docid><scope>%s</scope><identifier>%s</identifier><revision>%s</revision></docid>"+
				"<documentType>%s</documentType><documentURL>%s%s</documentURL></document>\n", e.scope, e.identifier, e.revision, s.docType, s.srv.URL, e.path)
		}
		b.WriteString("</hrv:harvestList>\n")
		w.Write(b.Bytes())
	})
	mux.HandleFunc("/doc/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, ok := s.docs[r.URL.Path]
		s.gets[r.URL.Path] = append(s.gets[r.URL.Path], r.Header.Get("If-Modified-Since")+"|"+r.Header.Get("If-None-Match"))
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".xml") {
			w.Header().Set("Content-Type", "text/xml")
		} else {
			w.Header().Set("Content-Type", "text/plain")
		}
		http.ServeContent(w, r, r.URL.Path, listModTime, strings.NewReader(body))
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *listSite) list() string { return s.srv.URL + "/harvestlist.xml" }

func (s *listSite) set(entries ...listEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = entries
}

func (s *listSite) getsOf(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.gets[path]...)
}

// TestNewRevisionNotAskedWithOldValidators: knb.100 is held at revision
// 1; the list now gives revision 2 at a URL of its own, on a static
// server whose files share one modification time. Revision 2 is not asked
// for with revision 1's validators: it is fetched and stored, and the
// report says updated 1 → 2.
func TestNewRevisionNotAskedWithOldValidators(t *testing.T) {
	s := newListSite(t, "text/plain", map[string]string{
		"/doc/100.1": "knb.100 at revision 1\n",
		"/doc/100.2": "knb.100 at revision 2, rewritten\n",
	}, listEntry{"knb", "100", "1", "/doc/100.1"})
	mirror, st := destination(t)
	rep, err := harvestOf(t, s.list(), mirror, st, nil)
	if err != nil || rep.Resources.Written != 1 {
		t.Fatalf("first harvest: %v %s", err, rep.Summary())
	}
	s.set(listEntry{"knb", "100", "2", "/doc/100.2"})
	rep, err = harvestOf(t, s.list(), mirror, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := mirror.Get(t.Context(), "knb.100")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	held, _, _ := st.Resource(t.Context(), s.list(), "knb.100")
	if string(got) != "knb.100 at revision 2, rewritten\n" {
		t.Errorf("the sink holds %q under revision %s (written %d, unchanged %d; documents %+v); GETs of /doc/100.2 with If-Modified-Since|If-None-Match: %q",
			got, held.Version, rep.Resources.Written, rep.Resources.Unchanged, rep.Documents, s.getsOf("/doc/100.2"))
	}
	var updated bool
	for _, d := range rep.Documents {
		updated = updated || (d.URI == "knb.100" && d.Outcome == runreport.DocUpdated && d.Previous == "1" && d.Version == "2")
	}
	if !updated {
		t.Errorf("the report does not say knb.100 updated 1 → 2: %+v", rep.Documents)
	}
}

// smallEML is a small EML 2.2.0 document.
const smallEML = `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="knb.%d.1" system="knb"><dataset><title>caf%s</title></dataset></eml:eml>` + "\n"

// TestValidWellFormedStored: with validation on, documents that are
// well-formed though not as the plainest are: one with a UTF-8 byte order
// mark, one declaring ISO-8859-1, one declaring US-ASCII — each is stored.
func TestValidWellFormedStored(t *testing.T) {
	ns := "https://eml.ecoinformatics.org/eml-2.2.0"
	docs := map[string]string{
		"/doc/1.xml": fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+smallEML, 1, "\u00e9"),
		"/doc/2.xml": "\ufeff" + fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+smallEML, 2, "\u00e9"),
		"/doc/3.xml": fmt.Sprintf(`<?xml version="1.0" encoding="ISO-8859-1"?>`+"\n"+smallEML, 3, "\xe9"),
		"/doc/4.xml": fmt.Sprintf(`<?xml version="1.0" encoding="US-ASCII"?>`+"\n"+smallEML, 4, "e"),
	}
	var entries []listEntry
	for i := 1; i <= 4; i++ {
		entries = append(entries, listEntry{"knb", fmt.Sprint(i), "1", fmt.Sprintf("/doc/%d.xml", i)})
	}
	s := newListSite(t, ns, docs, entries...)
	mirror, st := destination(t)
	rep, err := harvestOf(t, s.list(), mirror, st, func(o *pipeline.Options) { o.Validate = true })
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		t.Errorf("a valid document refused: %s at %s: %s", f.URI, f.Stage, f.Error)
	}
	if rep.Resources.Written != 4 {
		t.Errorf("written %d of 4: %s", rep.Resources.Written, rep.Summary())
	}
}

// TestListedTwiceHigherFirst: knb.1 is listed at revision 2, then again at
// revision 1 (another URL). Revision 2 is harvested, and the skip of the
// second entry names the winner, revision 2.
func TestListedTwiceHigherFirst(t *testing.T) {
	s := newListSite(t, "text/plain", map[string]string{"/doc/1.2": "two\n", "/doc/1.1": "one\n"},
		listEntry{"knb", "1", "2", "/doc/1.2"}, listEntry{"knb", "1", "1", "/doc/1.1"})
	mirror, st := destination(t)
	rep, err := harvestOf(t, s.list(), mirror, st, nil)
	if err != nil || rep.Resources.Written != 1 || len(rep.Skips) != 1 {
		t.Fatalf("%v %s %+v", err, rep.Summary(), rep.Skips)
	}
	if r := rep.Skips[0].Reason; !strings.Contains(r, "revision 2 wins") {
		t.Errorf("skip of the entry at revision 1: %q, want it to say revision 2 wins", r)
	}
}

// TestListInISO88591: a harvest list declared (well-formed) in ISO-8859-1
// is read as any other.
func TestListInISO88591(t *testing.T) {
	mux := http.NewServeMux()
	var base string
	mux.HandleFunc("/harvestlist.xml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<?xml version="1.0" encoding="ISO-8859-1"?>`+"\n"+`<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">`+
			`<document><docid><scope>knb</scope><identifier>1</identifier><revision>1</revision></docid>`+
			`<documentType>text/plain</documentType><documentURL>%s/doc/1</documentURL></document></hrv:harvestList>`+"\n", base)
	})
	mux.HandleFunc("/doc/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "one\n") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base = srv.URL
	mirror, st := destination(t)
	rep, err := harvestOf(t, base+"/harvestlist.xml", mirror, st, nil)
	if err != nil || rep.Resources.Written != 1 {
		t.Errorf("a harvest list in ISO-8859-1: %v; %s", err, rep.Summary())
	}
}

// TestNotWellFormedRefused: with validation on, documents that are not
// well-formed XML (XML 1.0: a repeated attribute; a markup declaration
// outside a DOCTYPE; an XML declaration not at the very start; a DOCTYPE
// after the root element) are refused, none stored.
func TestNotWellFormedRefused(t *testing.T) {
	ns := "https://eml.ecoinformatics.org/eml-2.2.0"
	root := `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="knb.%d.1"><dataset><title>t</title></dataset></eml:eml>`
	cases := map[string]string{
		"/doc/1.xml": `<eml:eml xmlns:eml="https://eml.ecoinformatics.org/eml-2.2.0" packageId="knb.1.1" packageId="knb.666.1"><dataset><title>t</title></dataset></eml:eml>`,
		"/doc/2.xml": `<!this is not a declaration>` + fmt.Sprintf(root, 2),
		"/doc/3.xml": "\n\n" + `<?xml version="1.0" encoding="UTF-8"?>` + fmt.Sprintf(root, 3),
		"/doc/4.xml": fmt.Sprintf(root, 4) + `<!DOCTYPE eml>`,
	}
	var entries []listEntry
	for i := 1; i <= 4; i++ {
		entries = append(entries, listEntry{"knb", fmt.Sprint(i), "1", fmt.Sprintf("/doc/%d.xml", i)})
	}
	s := newListSite(t, ns, cases, entries...)
	mirror, st := destination(t)
	rep, err := harvestOf(t, s.list(), mirror, st, func(o *pipeline.Options) { o.Validate = true })
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range rep.Failures {
		failed[f.URI] = f.Stage == "validate"
	}
	for i := 1; i <= 4; i++ {
		uri := fmt.Sprintf("knb.%d", i)
		if _, gerr := mirror.Get(t.Context(), uri); gerr == nil || !failed[uri] {
			t.Errorf("%s, not well-formed (%q), is stored as valid", uri, cases[fmt.Sprintf("/doc/%d.xml", i)][:60])
		}
	}
}
