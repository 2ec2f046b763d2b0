package publish

// Adversarial review: what a consumer following the published documents
// over HTTP relies on.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/state"
)

// getFrom GETs url from the publish serve handler, with extra headers.
func getFrom(t *testing.T, srv http.Handler, url string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// docFrom reads the document at url through srv.
func docFrom(t *testing.T, srv http.Handler, url string) (manifest.Header, []manifest.Entry) {
	t.Helper()
	rec := getFrom(t, srv, url, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", url, rec.Code)
	}
	return readEntries(t, rec.Body)
}

// capabilityOf returns the URL of the capability c in the one set's
// Capability List, read through srv.
func capabilityOf(t *testing.T, srv http.Handler, o Options, c manifest.Capability) string {
	t.Helper()
	_, sets := docFrom(t, srv, o.BaseURL+"/"+WellKnown)
	for _, s := range sets {
		_, caps := docFrom(t, srv, s.Loc)
		for _, e := range caps {
			if e.Metadata.Capability == c {
				return e.Loc
			}
		}
	}
	t.Fatalf("no %s published", c)
	return ""
}

// TestResourceDumpPackageAcrossPublications: a consumer reads the Resource
// Dump (each package's URL, length and sha-256), a publication happens,
// and it then downloads a package the document named: it gets the bytes
// that document describes, since packages are named after the at they are
// current to (publish serve still serves the previous publication's).
func TestResourceDumpPackageAcrossPublications(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	f := newFixture(t)
	bodies := memBodies{}
	for i := range 4 {
		bodies[uri(src, i)] = "one"
	}
	f.put(src, 0, 4, state.ChangeCreated, "one")
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries, o.MaxBytes, o.Bodies = 1000, 1<<20, bodies
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	srv, err := (&Server{Out: out, BaseURL: o.BaseURL}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	rdURL := capabilityOf(t, srv, o, manifest.ResourceDump)
	rdh, pkgs := docFrom(t, srv, rdURL)
	if len(pkgs) == 0 {
		t.Fatal("no package listed")
	}

	// A harvest updates one resource; the daemon publishes.
	bodies[uri(src, 1)] = "two"
	f.put(src, 1, 1, state.ChangeUpdated, "two")
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}

	// The consumer downloads the packages its Resource Dump named.
	for _, p := range pkgs {
		rec := getFrom(t, srv, p.Loc, nil)
		if rec.Code != http.StatusOK {
			// A 404 would be honest: the consumer starts again.
			t.Logf("GET %s: %d", p.Loc, rec.Code)
			continue
		}
		b := rec.Body.Bytes()
		sum := sha256.Sum256(b)
		if !bytes.Equal(sum[:], p.Metadata.Hashes.SHA256) || int64(len(b)) != p.Metadata.Length {
			t.Errorf("GET %s (listed in the Resource Dump at %s with length %d, sha-256 %x) after a publication: %d bytes, sha-256 %x — another generation's package under the same name",
				strings.TrimPrefix(p.Loc, o.BaseURL+"/"), rdh.Metadata.At.Format(time.RFC3339Nano), p.Metadata.Length, p.Metadata.Hashes.SHA256, len(b), sum)
		}
		if ml, ok := p.Link("contents"); ok {
			mh, _ := docFrom(t, srv, ml.Href)
			if !mh.Metadata.At.Equal(rdh.Metadata.At) {
				t.Errorf("GET %s (the package's manifest, rel=contents): at %s, the Resource Dump that named it at %s",
					strings.TrimPrefix(ml.Href, o.BaseURL+"/"), mh.Metadata.At.Format(time.RFC3339Nano), rdh.Metadata.At.Format(time.RFC3339Nano))
			}
		}
	}
}

// TestOpenChangeDumpPackageAcrossPublications: the Change Dump's open
// package grows with each publication; a consumer that read the Change
// Dump still gets the bytes it lists under the name it lists, since an
// open package is named after its last change too.
func TestOpenChangeDumpPackageAcrossPublications(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	f := newFixture(t)
	bodies := memBodies{}
	for i := range 3 {
		bodies[uri(src, i)] = "one"
	}
	f.put(src, 0, 3, state.ChangeCreated, "one")
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries, o.MaxBytes, o.Bodies = 1000, 1<<20, bodies
	o.ChangePeriod = 24 * time.Hour
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	srv, err := (&Server{Out: out, BaseURL: o.BaseURL}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	_, pkgs := docFrom(t, srv, capabilityOf(t, srv, o, manifest.ChangeDump))
	var open *manifest.Entry
	for i := range pkgs {
		if pkgs[i].Metadata.Until.IsZero() {
			open = &pkgs[i]
		}
	}
	if open == nil {
		t.Fatal("no open package")
	}

	bodies[uri(src, 3)] = "one"
	f.put(src, 3, 1, state.ChangeCreated, "one")
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	rec := getFrom(t, srv, open.Loc, nil)
	if rec.Code != http.StatusOK {
		t.Logf("GET %s: %d", open.Loc, rec.Code)
		return
	}
	b := rec.Body.Bytes()
	sum := sha256.Sum256(b)
	if !bytes.Equal(sum[:], open.Metadata.Hashes.SHA256) || int64(len(b)) != open.Metadata.Length {
		t.Errorf("GET %s (listed in the Change Dump with length %d, sha-256 %x) after a publication: %d bytes, sha-256 %x",
			strings.TrimPrefix(open.Loc, o.BaseURL+"/"), open.Metadata.Length, open.Metadata.Hashes.SHA256, len(b), sum)
	}
}

// TestOnlyLastChangeListOpen: however far the clock is behind the stamps,
// a period a later stamped change follows is closed: only the last Change
// List is open.
func TestOnlyLastChangeListOpen(t *testing.T) {
	// The clock was set back: it reads day+2h though the state stamped a
	// change at day+25h.
	pages, o := dailyChangeLists(t, time.Hour, 25*time.Hour, 2*time.Hour)
	for k, pg := range pages {
		if k < len(pages)-1 && pg.Metadata.Until.IsZero() {
			t.Errorf("change list %s (from %s) has no until, though a later list follows it (from %s) and no change can be stamped into it",
				strings.TrimPrefix(pg.Loc, o.BaseURL+"/"), pg.Metadata.From.Format(time.RFC3339), pages[k+1].Metadata.From.Format(time.RFC3339))
		}
	}
}

// TestChangeListsContiguous: a period with no change between two with
// changes has no list, and the Change Lists stay contiguous: each one's
// from is where the one before it ended.
func TestChangeListsContiguous(t *testing.T) {
	pages, o := dailyChangeLists(t, time.Hour, 49*time.Hour, 50*time.Hour)
	for k := 1; k < len(pages); k++ {
		if u := pages[k-1].Metadata.Until; !u.IsZero() && !pages[k].Metadata.From.Equal(u) {
			t.Errorf("change lists not contiguous: %s ends at %s, the next, %s, begins at %s; no list covers [%s, %s)",
				strings.TrimPrefix(pages[k-1].Loc, o.BaseURL+"/"), u.Format(time.RFC3339), strings.TrimPrefix(pages[k].Loc, o.BaseURL+"/"),
				pages[k].Metadata.From.Format(time.RFC3339), u.Format(time.RFC3339), pages[k].Metadata.From.Format(time.RFC3339))
		}
	}
}

// TestIfModifiedSinceWithinASecond: a consumer polling the open Change
// List with If-Modified-Since (whole seconds) is never told 304 for a list
// rewritten within the second of the copy it holds.
func TestIfModifiedSinceWithinASecond(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	f := newFixture(t)
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries, o.MaxBytes = 1000, 1<<20
	srv, err := (&Server{Out: out, BaseURL: o.BaseURL}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	// Publish until two publications, each with a new change, land in
	// one second (the daemon publishes after every harvest); no timing is
	// asserted: the check below is made only on such a pair.
	for try := range 50 {
		f.put(src, 2*try, 1, state.ChangeCreated, "v1")
		if _, err := Publish(ctx, FromState(f.st), o); err != nil {
			t.Fatal(err)
		}
		idx := testBase + "/sets/" + slug(src) + "/changelist-index.xml"
		_, pages := docFrom(t, srv, idx)
		openURL := pages[len(pages)-1].Loc
		first := getFrom(t, srv, openURL, nil)
		lm := first.Header().Get("Last-Modified")
		_, es1 := readEntries(t, first.Body)

		f.put(src, 2*try+1, 1, state.ChangeCreated, "v1")
		if _, err := Publish(ctx, FromState(f.st), o); err != nil {
			t.Fatal(err)
		}
		plain := getFrom(t, srv, openURL, nil)
		if plain.Header().Get("Last-Modified") != lm {
			continue // another second: try again
		}
		_, es2 := readEntries(t, bytes.NewReader(plain.Body.Bytes()))
		if len(es2) != len(es1)+1 {
			t.Fatalf("the open list holds %d changes, then %d", len(es1), len(es2))
		}
		cond := getFrom(t, srv, openURL, map[string]string{"If-Modified-Since": lm})
		if cond.Code == http.StatusNotModified {
			t.Errorf("GET %s with If-Modified-Since: %s (its Last-Modified when it held %d changes): 304 Not Modified, though it now holds %d",
				strings.TrimPrefix(openURL, o.BaseURL+"/"), lm, len(es1), len(es2))
		}
		return
	}
	t.Log("no two publications within one second in 50 tries")
}

// TestChangeListIndexOutgrows: a source with more periods of changes than
// a Change List Index may list is still published: the oldest lists are
// left out, and the index's from says where its changes begin.
func TestChangeListIndexOutgrows(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &memHoldings{src: src}
	bodies := memBodies{}
	for i := range 6 {
		h.set(bodies, fmt.Sprintf("%s/r/%04d.txt", src, i), state.ChangeCreated, "v1", day.Add(time.Duration(i)*time.Minute+time.Second))
	}
	out := t.TempDir()
	o := testOptions(out)
	o.ChangePeriod, o.MaxEntries, o.MaxBytes, o.Bodies = time.Minute, 5, 1<<20, bodies
	o.Now = func() time.Time { return day.Add(time.Hour) }
	if _, err := Publish(ctx, h, o); err != nil {
		t.Fatalf("a source with changes in 6 periods (MaxEntries 5) cannot be published: %v", err)
	}
	for _, name := range []string{"changelist-index.xml", "changedump.xml"} {
		hd, docs := readDoc(t, filepath.Join(out, Current), testBase+"/sets/"+slug(src)+"/"+name, o)
		switch {
		case len(docs) != 5:
			t.Errorf("%s lists %d documents, want the newest 5", name, len(docs))
		case !hd.Metadata.From.Equal(day.Add(time.Minute)) || !docs[0].Metadata.From.Equal(hd.Metadata.From):
			t.Errorf("%s is from %s and its first document from %s; want both from %s, the oldest period kept",
				name, hd.Metadata.From, docs[0].Metadata.From, day.Add(time.Minute))
		}
	}
}

// dailyChangeLists publishes a source of two changes, stamped first and
// second after the start of a day, with daily change periods and the clock
// reading now after that start, and returns its Change List Index's
// entries and the options it was published with.
func dailyChangeLists(t *testing.T, first, second, now time.Duration) ([]manifest.Entry, Options) {
	t.Helper()
	src := "http://a.example/rs"
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &memHoldings{src: src}
	bodies := memBodies{}
	h.set(bodies, src+"/r/0000.txt", state.ChangeCreated, "v1", day.Add(first))
	h.set(bodies, src+"/r/0001.txt", state.ChangeCreated, "v1", day.Add(second))
	out := t.TempDir()
	o := testOptions(out)
	o.ChangePeriod, o.MaxEntries, o.MaxBytes = 24*time.Hour, 1000, 1<<20
	o.Now = func() time.Time { return day.Add(now) }
	if _, err := Publish(context.Background(), h, o); err != nil {
		t.Fatal(err)
	}
	_, pages := readDoc(t, filepath.Join(out, Current), testBase+"/sets/"+slug(src)+"/changelist-index.xml", o)
	return pages, o
}
