package publish

// The edges of publishing: what a consumer reading across publications,
// a clock set back, a crash or long URIs must not break.

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/state"
)

// memHoldings is Holdings held in memory, with stamps chosen by the test:
// one source, its resources (in URI order) and its changes (in the order
// recorded, stamps increasing).
type memHoldings struct {
	src       string
	resources []state.Resource
	changes   []state.ChangeRecord
}

func (h *memHoldings) View(ctx context.Context, fn func(View) error) error { return fn(memView{h}) }

type memView struct{ h *memHoldings }

func (v memView) At(context.Context) (time.Time, error) {
	if n := len(v.h.changes); n > 0 {
		return v.h.changes[n-1].Recorded, nil
	}
	return time.Time{}, nil
}
func (v memView) Sources(context.Context) ([]string, error)           { return []string{v.h.src}, nil }
func (v memView) DescribedBy(context.Context, string) (string, error) { return v.h.src, nil }
func (v memView) SiteOf(context.Context, string) (string, error)      { return "", nil }
func (v memView) CountResources(context.Context, string) (int64, error) {
	return int64(len(v.h.resources)), nil
}
func (v memView) Resources(_ context.Context, _ string, fn func(state.Resource) error) error {
	for _, r := range v.h.resources {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
func (v memView) Changes(_ context.Context, _ string, superseded bool, fn func(state.ChangeRecord) error) error {
	for i, c := range v.h.changes {
		if superseded {
			c.Superseded = slices.ContainsFunc(v.h.changes[i+1:], func(l state.ChangeRecord) bool { return l.URI == c.URI })
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// set records body as the held version of uri, with a change of kind
// change stamped at.
func (h *memHoldings) set(bodies memBodies, uri, change, body string, at time.Time) {
	bodies[uri] = body
	hs := fixity.Hashes{}
	s := md5.Sum([]byte(body))
	hs.MD5 = s[:]
	r := state.Resource{URI: uri, Source: h.src, Length: int64(len(body)), Hashes: hs, Type: "text/plain",
		Lastmod: at, Outcome: state.OutcomeWritten}
	i, found := slices.BinarySearchFunc(h.resources, uri, func(r state.Resource, u string) int { return strings.Compare(r.URI, u) })
	if found {
		h.resources[i] = r
	} else {
		h.resources = slices.Insert(h.resources, i, r)
	}
	h.changes = append(h.changes, state.ChangeRecord{URI: uri, Source: h.src, Change: change, Length: int64(len(body)),
		Hashes: hs, Type: "text/plain", Lastmod: at, Recorded: at})
}

// memBodies is a sink.Inventory of bodies by URI.
type memBodies map[string]string

func (b memBodies) Get(_ context.Context, uri string) (io.ReadCloser, error) {
	s, ok := b[uri]
	if !ok {
		return nil, fmt.Errorf("no body of %s: %w", uri, iofs.ErrNotExist)
	}
	return io.NopCloser(strings.NewReader(s)), nil
}

func (b memBodies) Walk(_ context.Context, fn func(string) error) error {
	for u := range b {
		if err := fn(u); err != nil {
			return err
		}
	}
	return nil
}

// dumpPkg is a package a Change Dump lists, read back.
type dumpPkg struct {
	loc         string
	from, until time.Time
	sha         string
	length      int64
	uris        []string // the manifest's entries, by their via (original) URI
}

// readChangeDump reads the published Change Dump of the one set under out:
// each package it lists, with the entries of its manifest.
func readChangeDump(t *testing.T, out string, o Options) []dumpPkg {
	t.Helper()
	cur := filepath.Join(out, Current)
	var cdURL string
	_, sets := readDoc(t, cur, o.BaseURL+"/"+WellKnown, o)
	for _, s := range sets {
		_, caps := readDoc(t, cur, s.Loc, o)
		for _, c := range caps {
			if c.Metadata.Capability == manifest.ChangeDump {
				cdURL = c.Loc
			}
		}
	}
	if cdURL == "" {
		t.Fatal("no Change Dump published")
	}
	_, pkgs := readDoc(t, cur, cdURL, o)
	var res []dumpPkg
	for _, p := range pkgs {
		b, err := os.ReadFile(filepath.Join(cur, filepath.FromSlash(strings.TrimPrefix(p.Loc, o.BaseURL+"/"))))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if !bytes.Equal(sum[:], p.Metadata.Hashes.SHA256) {
			t.Errorf("%s: the Change Dump's sha-256 is not the package's", p.Loc)
		}
		d := dumpPkg{loc: p.Loc, from: p.Metadata.From, until: p.Metadata.Until, sha: fmt.Sprintf("%x", sum), length: int64(len(b))}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		mf, err := zr.Open("manifest.xml")
		if err != nil {
			t.Fatal(err)
		}
		_, es := readEntries(t, mf)
		for _, e := range es {
			d.uris = append(d.uris, original(e))
		}
		res = append(res, d)
	}
	return res
}

// TestClosedChangeDumpPackageKept: a Change Dump package listed with until
// is closed ("the document will not be updated anymore", spec §12.1, which
// §13.1 applies to Change Dumps): when a change it packs is superseded
// later, the next publication keeps its bytes and interval, and a consumer
// that processed it and resumes after its until receives every change.
func TestClosedChangeDumpPackageKept(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	f := newFixture(t)
	h := FromState(f.st)
	bodies := memBodies{}
	for i := range 4 {
		bodies[uri(src, i)] = "one"
	}
	f.put(src, 0, 4, state.ChangeCreated, "one")
	out := t.TempDir()
	o := testOptions(out)
	o.ChangePeriod, o.MaxEntries, o.Bodies = 24*time.Hour, 1000, bodies
	o.DumpSize = 6 // two bodies of 3 bytes a package
	o.Now = time.Now
	if _, err := Publish(ctx, h, o); err != nil {
		t.Fatal(err)
	}
	first := readChangeDump(t, out, o)

	// A consumer applies the closed packages of the first publication (the
	// open one will change).
	applied := map[string]bool{}
	var processedUntil time.Time
	for _, pk := range first {
		if pk.until.IsZero() {
			continue
		}
		for _, u := range pk.uris {
			applied[u] = true
		}
		processedUntil = pk.until
	}
	if processedUntil.IsZero() {
		t.Fatal("no closed package in the first publication")
	}

	// Later r0 is updated: its created change is superseded.
	bodies[uri(src, 0)] = "two"
	f.put(src, 0, 1, state.ChangeUpdated, "two")
	if _, err := Publish(ctx, h, o); err != nil {
		t.Fatal(err)
	}
	second := readChangeDump(t, out, o)

	// A closed package never changes.
	byLoc := map[string]dumpPkg{}
	for _, pk := range second {
		byLoc[pk.loc] = pk
	}
	for _, pk := range first {
		if pk.until.IsZero() {
			continue
		}
		now, ok := byLoc[pk.loc]
		if !ok || now.sha != pk.sha || !now.until.Equal(pk.until) {
			t.Errorf("closed package %s [%s, %s) holding %v was rewritten: now [%s, %s) holding %v (listed: %v)",
				strings.TrimPrefix(pk.loc, o.BaseURL+"/"), pk.from.Format("15:04:05.000000"), pk.until.Format("15:04:05.000000"), short(pk.uris),
				now.from.Format("15:04:05.000000"), now.until.Format("15:04:05.000000"), short(now.uris), ok)
		}
	}
	// The consumer resumes with the packages after what it processed.
	for _, pk := range second {
		if !pk.from.Before(processedUntil) {
			for _, u := range pk.uris {
				applied[u] = true
			}
		}
	}
	for i := range 4 {
		if !applied[uri(src, i)] {
			t.Errorf("a consumer of the Change Dump never receives %s", uri(src, i))
		}
	}
}

func short(uris []string) []string {
	var out []string
	for _, u := range uris {
		out = append(out, u[strings.LastIndex(u, "/")+1:])
	}
	return out
}

// TestClosedChangeListNeverGains: with the clock ahead when one
// publication runs (here 2 hours; with a 1h period, a clock a minute or
// two ahead just after the hour is enough) and set back before the next
// commit, the next change must not land in a Change List published closed
// (with until): a Destination that finished that list, as the spec tells
// it, continues after its until and would never see the change.
func TestClosedChangeListNeverGains(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	src := "http://a.example/rs"
	f.put(src, 0, 2, state.ChangeCreated, "v1")
	out := t.TempDir()
	o := testOptions(out)
	o.ChangePeriod = time.Hour
	o.MaxEntries, o.MaxBytes = 1000, 1<<20
	o.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } // the clock ahead
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	type list struct{ from, until time.Time }
	var closed []list
	var openFrom time.Time // what the first publication left open starts there
	seen := map[time.Time]bool{}
	cur := filepath.Join(out, Current)
	_, pages := readDoc(t, cur, testBase+"/sets/"+slug(src)+"/changelist-index.xml", o)
	for _, pg := range pages {
		if !pg.Metadata.Until.IsZero() {
			closed = append(closed, list{pg.Metadata.From, pg.Metadata.Until})
		} else if openFrom.IsZero() {
			openFrom = pg.Metadata.From
		}
		_, es := readDoc(t, cur, pg.Loc, o)
		for _, e := range es {
			seen[e.Metadata.Datetime] = true
		}
	}
	// With the clock ahead, no period is closed yet: no change is stamped
	// after any of them, and the next may be stamped in any.

	// The clock set right; a harvest records one more change.
	f.put(src, 2, 1, state.ChangeCreated, "v1")
	o.Now = time.Now
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	pub := readSource(t, out, o).sets[src]
	for _, c := range pub.changes {
		dt := c.Metadata.Datetime
		if seen[dt] {
			continue
		}
		inClosed := false
		for _, l := range closed {
			if !dt.Before(l.from) && dt.Before(l.until) {
				inClosed = true
				t.Errorf("change of %s at %s is listed within [%s, %s), a Change List already published closed",
					original(c), dt.Format(time.RFC3339Nano), l.from.Format(time.RFC3339), l.until.Format(time.RFC3339))
			}
		}
		if !inClosed && dt.Before(openFrom) {
			t.Errorf("change of %s at %s is listed before %s, where the first publication's open list began",
				original(c), dt.Format(time.RFC3339Nano), openFrom.Format(time.RFC3339))
		}
	}
}

// TestCrashAfterGenerationRename: a run killed after it renamed its
// generation into place but before it moved current (commit) leaves
// generations/gN+1 while current still names gN: later runs still publish.
func TestCrashAfterGenerationRename(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.put("http://a.example/rs", 0, 3, state.ChangeCreated, "x")
	out := t.TempDir()
	o := testOptions(out)
	res, err := Publish(ctx, FromState(f.st), o)
	if err != nil {
		t.Fatal(err)
	}
	// What the killed run left: the next generation complete under its
	// final name, with its sums, current unmoved.
	next := fmt.Sprintf("g%06d", 2)
	if err := os.CopyFS(filepath.Join(out, genDir, next), os.DirFS(filepath.Join(out, genDir, res.Generation))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, sumsDir, res.Generation))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, sumsDir, next), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.put("http://a.example/rs", 3, 1, state.ChangeCreated, "x")
	for run := range 2 {
		if _, err := Publish(ctx, FromState(f.st), o); err != nil {
			t.Errorf("publish %d after the crash: %v", run+1, err)
		}
	}
}

// TestDumpManifestSize: a dump package's manifest (manifest.xml, and the
// -manifest.xml beside it) is cut at MaxBytes a document, as every list
// is (the sitemap protocol's 50 MB), not only at MaxEntries entries and
// DumpSize body bytes.
func TestDumpManifestSize(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	h := &memHoldings{src: src}
	bodies := memBodies{}
	p := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 60 {
		h.set(bodies, fmt.Sprintf("%s/%s/%04d.txt", src, strings.Repeat("long-path-", 30), i), state.ChangeCreated, "v1", p.Add(time.Duration(i+1)*time.Second))
	}
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries, o.MaxBytes, o.Bodies = 1000, 32<<10, bodies
	o.Now = func() time.Time { return p.Add(time.Hour) }
	if _, err := Publish(ctx, h, o); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(filepath.Join(out, Current)+"/", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".xml") && st.Size() > o.MaxBytes {
			t.Errorf("%s: %d bytes, over MaxBytes %d", filepath.Base(path), st.Size(), o.MaxBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResourceListPagesAcrossPublications: a consumer that reads a
// Resource List Index and its first page before a publication and the
// second page after it (a baseline of a list past 50,000 entries takes a
// while; the daemon publishes after every harvest) must get the second
// page of its index's cut: were the pages cut anew under the same names, a
// deletion in page 1 would move a resource from page 2 into page 1, and no
// change after the index's at would name it.
func TestResourceListPagesAcrossPublications(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	src := "http://a.example/rs"
	f.put(src, 0, 10, state.ChangeCreated, "one")
	out := t.TempDir()
	o := testOptions(out) // 5 entries a page
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	cur := filepath.Join(out, Current)
	dir := testBase + "/sets/" + slug(src)
	ih, pages := readDoc(t, cur, dir+"/resourcelist-index.xml", o)
	if !ih.IsIndex() || len(pages) != 2 {
		t.Fatalf("want an index of 2 pages, got %d", len(pages))
	}
	held := map[string]bool{}
	_, es := readDoc(t, cur, pages[0].Loc, o)
	for _, e := range es {
		held[original(e)] = true
	}

	// A harvest deletes resource 2, and the daemon publishes.
	f.del(src, 2)
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	// The consumer reads the second page it was given through publish
	// serve: the page of the cut its index named, or none.
	srv, err := (&Server{Out: out, BaseURL: o.BaseURL}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, pages[1].Loc, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s (the index's second page, after a publication): %d", pages[1].Loc, rec.Code)
	}
	h2, es2 := readEntries(t, rec.Body)
	if !h2.Metadata.At.Equal(ih.Metadata.At) {
		t.Errorf("the second page is at %s, its index at %s", h2.Metadata.At, ih.Metadata.At)
	}
	for _, e := range es2 {
		held[original(e)] = true
	}
	// What the consumer then applies: the changes after the index's at.
	for _, c := range readSource(t, out, o).sets[src].changes {
		if c.Metadata.Datetime.After(ih.Metadata.At) && c.Metadata.Change == manifest.Deleted {
			delete(held, original(c))
		}
	}
	for i := range 10 {
		if i != 2 && !held[uri(src, i)] {
			t.Errorf("the consumer never holds %s, held unchanged throughout", uri(src, i))
		}
	}
}

// TestBaseURLMadeAURI: every loc and href is an RFC 3986 URI, the
// documents' own URLs too (the Capability Lists, the lists, their up and
// index links, the copies' locs), when the base URL has a space, a
// non-ASCII character or a '<' in its path (url.Parse takes all three).
func TestBaseURLMadeAURI(t *testing.T) {
	ctx := context.Background()
	for _, base := range []string{"http://127.0.0.1:1/my pub", "http://127.0.0.1:1/publié", "http://127.0.0.1:1/a<b"} {
		t.Run(base, func(t *testing.T) {
			f := newFixture(t)
			f.put("http://a.example/rs", 0, 1, state.ChangeCreated, "one")
			out := t.TempDir()
			o := testOptions(out)
			o.BaseURL = base
			if _, err := Publish(ctx, FromState(f.st), o); err != nil {
				return // refused: fine
			}
			bad := map[string]bool{}
			err := filepath.WalkDir(filepath.Join(out, Current)+"/", func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".xml") || strings.HasSuffix(path, WellKnown)) {
					return err
				}
				fh, err := os.Open(path)
				if err != nil {
					return err
				}
				defer fh.Close()
				r, err := manifest.NewReader(fh, manifest.Options{})
				if err != nil {
					return err
				}
				check := func(s string) {
					if manifest.ToURI(s) != s {
						bad[s] = true
					}
				}
				for _, l := range r.Header().Links {
					check(l.Href)
				}
				for {
					e, err := r.Next()
					if err == io.EOF {
						return nil
					}
					if err != nil {
						return err
					}
					check(e.Loc)
					for _, l := range e.Links {
						check(l.Href)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) > 0 {
				var some []string
				for s := range bad {
					some = append(some, s)
				}
				slices.Sort(some)
				t.Errorf("%d locs and hrefs are not URIs, e.g. %q", len(bad), some[0])
			}
		})
	}
}

// TestPeriodClosedByALaterChange: a period's Change List and Change Dump
// package are closed once a change of the source is stamped after the
// period's end, and not before.
func TestPeriodClosedByALaterChange(t *testing.T) {
	ctx := context.Background()
	src := "http://a.example/rs"
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   []time.Time // the changes' stamps
		now  time.Time
		want []bool // closed, by list (in order)
	}{
		{"one period, later by the clock", []time.Time{day.Add(time.Hour)}, day.Add(72 * time.Hour), []bool{false}},
		{"a change in the next period", []time.Time{day.Add(time.Hour), day.Add(25 * time.Hour)}, day.Add(26 * time.Hour), []bool{true, false}},
		{"a change days later", []time.Time{day.Add(time.Hour), day.Add(72 * time.Hour)}, day.Add(73 * time.Hour), []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &memHoldings{src: src}
			bodies := memBodies{}
			for i, at := range tc.at {
				h.set(bodies, fmt.Sprintf("%s/r/%04d.txt", src, i), state.ChangeCreated, "v1", at)
			}
			out := t.TempDir()
			o := testOptions(out)
			o.ChangePeriod, o.MaxEntries, o.MaxBytes, o.Bodies = 24*time.Hour, 1000, 1<<20, bodies
			o.Now = func() time.Time { return tc.now }
			if _, err := Publish(ctx, h, o); err != nil {
				t.Fatal(err)
			}
			_, pages := readDoc(t, filepath.Join(out, Current), testBase+"/sets/"+slug(src)+"/changelist-index.xml", o)
			var got []bool
			for _, pg := range pages {
				got = append(got, !pg.Metadata.Until.IsZero())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("change lists closed: %v, want %v", got, tc.want)
			}
			got = got[:0]
			for _, pk := range readChangeDump(t, out, o) {
				got = append(got, !pk.until.IsZero())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("change dump packages closed: %v, want %v", got, tc.want)
			}
		})
	}
}

// readEntries reads a document's header and every entry.
func readEntries(t *testing.T, in io.Reader) (manifest.Header, []manifest.Entry) {
	t.Helper()
	r, err := manifest.NewReader(in, manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var es []manifest.Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			return r.Header(), es
		}
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, *e)
	}
}
