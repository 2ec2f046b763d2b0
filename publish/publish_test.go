package publish

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/publish/schematest"
	"github.com/rsharvest/rsharvest/state"
)

const testBase = "http://127.0.0.1:1/pub"

// fixture is a state store written by code: sources with resources and
// their changes.
type fixture struct {
	t   *testing.T
	st  *state.Store
	run int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	run, err := st.BeginRun(context.Background(), state.Run{Mode: "baseline", Source: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st, run: run}
}

func sum(s string) fixity.Hashes {
	h := md5.Sum([]byte(s))
	return fixity.Hashes{MD5: h[:]}
}

// put records n resources of src (URIs uri(src, i)) as written, each with
// a change of kind change.
func (f *fixture) put(src string, from, n int, change, body string) {
	f.t.Helper()
	var b state.Batch
	for i := from; i < from+n; i++ {
		u := uri(src, i)
		lastmod := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
		b.Resources = append(b.Resources, state.Resource{URI: u, Source: src, Length: int64(len(body)), Hashes: sum(body), Type: "text/plain",
			Lastmod: lastmod, Outcome: state.OutcomeWritten, RunID: f.run})
		b.Changes = append(b.Changes, state.ChangeRecord{URI: u, Source: src, Change: change, Length: int64(len(body)), Hashes: sum(body), Type: "text/plain",
			RunID: f.run, Lastmod: lastmod})
	}
	if err := f.st.Commit(context.Background(), b); err != nil {
		f.t.Fatal(err)
	}
	f.described(src, src)
}

// described records that src's resource sets were found from the
// document at url (its checkpoint's DescribedBy), as a harvest does.
func (f *fixture) described(src, url string) {
	f.t.Helper()
	err := f.st.SetCheckpoint(context.Background(), state.Checkpoint{Source: src, ResourceSet: src, Next: time.Now(), DescribedBy: url})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) del(src string, i int) {
	f.t.Helper()
	u := uri(src, i)
	b := state.Batch{
		Resources: []state.Resource{{URI: u, Source: src, Length: -1, Outcome: state.OutcomeDeleted, Deleted: true, RunID: f.run}},
		Changes:   []state.ChangeRecord{{URI: u, Source: src, Change: state.ChangeDeleted, Length: -1, RunID: f.run}},
	}
	if err := f.st.Commit(context.Background(), b); err != nil {
		f.t.Fatal(err)
	}
}

func uri(src string, i int) string {
	if strings.Contains(src, "//oai.") {
		return fmt.Sprintf("oai:example.org:%d", i)
	}
	return fmt.Sprintf("%s/r/%04d.txt", src, i)
}

// source is a published Source read back: every document strictly parsed,
// its structure checked.
type source struct {
	sets map[string]*set // by source (describedby)
	docs int
}

type set struct {
	resources map[string]manifest.Entry
	at        time.Time // the Resource List's
	changes   []manifest.Entry
	open      int // open change lists
}

// warnFails is a slog handler that fails the test on any warning of the
// reader: a tolerated deviation from the specification.
type warnFails struct {
	t   *testing.T
	doc string
}

func (w warnFails) Enabled(context.Context, slog.Level) bool { return true }
func (w warnFails) Handle(_ context.Context, r slog.Record) error {
	w.t.Errorf("%s: reader warning: %s", w.doc, r.Message)
	return nil
}
func (w warnFails) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnFails) WithGroup(string) slog.Handler      { return w }

var zoned = regexp.MustCompile(`(?:(?:at|completed|from|until|datetime|modified)="([^"]*)"|<lastmod>([^<]*)</lastmod>)`)

// readDoc parses the document at url strictly, and checks its size, its
// number of entries and that each datetime has a zone.
func readDoc(t *testing.T, cur, url string, o Options) (manifest.Header, []manifest.Entry) {
	t.Helper()
	if !strings.HasPrefix(url, o.BaseURL+"/") {
		t.Fatalf("%s is not under the base URL", url)
	}
	b, err := os.ReadFile(filepath.Join(cur, filepath.FromSlash(strings.TrimPrefix(url, o.BaseURL+"/"))))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) > o.MaxBytes {
		t.Errorf("%s: %d bytes, over %d", url, len(b), o.MaxBytes)
	}
	for _, m := range zoned.FindAllStringSubmatch(string(b), -1) {
		v := m[1] + m[2]
		if !strings.HasSuffix(v, "Z") && !regexp.MustCompile(`[+-]\d\d:\d\d$`).MatchString(v) {
			t.Errorf("%s: datetime %q has no zone", url, v)
		}
	}
	r, err := manifest.NewReader(strings.NewReader(string(b)), manifest.Options{Logger: slog.New(warnFails{t, url})})
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	var es []manifest.Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		es = append(es, *e)
	}
	// Every loc and href is a URI as written (RFC 3986).
	isURI := func(s string) bool { return s != "" && manifest.ToURI(s) == s }
	for _, l := range r.Header().Links {
		if !isURI(l.Href) {
			t.Errorf("%s: header link %q is not a URI", url, l.Href)
		}
	}
	for _, e := range es {
		if !isURI(e.Loc) {
			t.Errorf("%s: loc %q is not a URI", url, e.Loc)
		}
		for _, l := range e.Links {
			if !isURI(l.Href) {
				t.Errorf("%s: %s's %s link %q is not a URI", url, e.Loc, l.Rel, l.Href)
			}
		}
	}
	if len(es) > o.MaxEntries {
		t.Errorf("%s: %d entries, over %d", url, len(es), o.MaxEntries)
	}
	return r.Header(), es
}

func wantLink(t *testing.T, url string, h manifest.Header, rel, href string) {
	t.Helper()
	if l, ok := h.Link(rel); !ok || l.Href != href {
		t.Errorf("%s: rel=%q link %q, want %q", url, rel, l.Href, href)
	}
}

// readSource reads the published Source under out from its Source
// Description down, as a consumer would.
func readSource(t *testing.T, out string, o Options) *source {
	t.Helper()
	cur := filepath.Join(out, Current)
	src := &source{sets: map[string]*set{}}
	sdURL := o.BaseURL + "/" + WellKnown
	h, caps := readDoc(t, cur, sdURL, o)
	src.docs++
	if h.Metadata.Capability != manifest.Description {
		t.Fatalf("source description: capability %q", h.Metadata.Capability)
	}
	for _, c := range caps {
		if c.Metadata.Capability != manifest.CapabilityList {
			t.Errorf("source description entry %s: capability %q", c.Loc, c.Metadata.Capability)
		}
		name := c.Loc
		if l, ok := c.Link("describedby"); ok {
			name = l.Href
		}
		s := &set{resources: map[string]manifest.Entry{}}
		src.sets[name] = s
		ch, entries := readDoc(t, cur, c.Loc, o)
		src.docs++
		if ch.Metadata.Capability != manifest.CapabilityList {
			t.Errorf("%s: capability %q", c.Loc, ch.Metadata.Capability)
		}
		wantLink(t, c.Loc, ch, "up", sdURL)
		for _, e := range entries {
			switch e.Metadata.Capability {
			case manifest.ResourceList:
				src.docs += readList(t, cur, e.Loc, c.Loc, o, manifest.ResourceList, func(h manifest.Header, e manifest.Entry) {
					if h.Metadata.At.IsZero() || h.Metadata.Completed.IsZero() {
						t.Errorf("resource list without at/completed")
					}
					s.resources[original(e)] = e
					s.at = h.Metadata.At
				}, nil)
			case manifest.ChangeList:
				src.docs += readList(t, cur, e.Loc, c.Loc, o, manifest.ChangeList, func(h manifest.Header, e manifest.Entry) {
					if dt := e.Metadata.Datetime; dt.Before(h.Metadata.From) || (!h.Metadata.Until.IsZero() && !dt.Before(h.Metadata.Until)) {
						t.Errorf("change %s at %v outside its list's [%v, %v)", e.Loc, dt, h.Metadata.From, h.Metadata.Until)
					}
					s.changes = append(s.changes, e)
				}, func(h manifest.Header) {
					if h.Metadata.From.IsZero() {
						t.Errorf("change list without from")
					}
					if h.Metadata.Until.IsZero() {
						s.open++
					}
				})
			default:
				t.Errorf("%s: entry capability %q", c.Loc, e.Metadata.Capability)
			}
		}
	}
	return src
}

// readList reads a list or its index and pages; it returns the number of
// documents read.
func readList(t *testing.T, cur, url, capURL string, o Options, want manifest.Capability, entry func(manifest.Header, manifest.Entry), page func(manifest.Header)) int {
	h, es := readDoc(t, cur, url, o)
	if h.Metadata.Capability != want {
		t.Errorf("%s: capability %q, want %q", url, h.Metadata.Capability, want)
	}
	wantLink(t, url, h, "up", capURL)
	if !h.IsIndex() {
		if page != nil {
			page(h)
		}
		for _, e := range es {
			entry(h, e)
		}
		return 1
	}
	n := 1
	for _, p := range es {
		ph, pes := readDoc(t, cur, p.Loc, o)
		n++
		if ph.IsIndex() || ph.Metadata.Capability != want {
			t.Errorf("%s: an index's page must be a %s", p.Loc, want)
		}
		wantLink(t, p.Loc, ph, "up", capURL)
		wantLink(t, p.Loc, ph, "index", url)
		if !p.Metadata.From.Equal(ph.Metadata.From) || !p.Metadata.Until.Equal(ph.Metadata.Until) {
			t.Errorf("%s: the index says [%v, %v), the list [%v, %v)", p.Loc, p.Metadata.From, p.Metadata.Until, ph.Metadata.From, ph.Metadata.Until)
		}
		if page != nil {
			page(ph)
		}
		for _, e := range pes {
			entry(ph, e)
		}
	}
	return n
}

// original is the URI of what entry e republishes: its via link's, when
// the copies are served (its loc is then the copy's), else its loc.
func original(e manifest.Entry) string {
	if l, ok := e.Link("via"); ok {
		return l.Href
	}
	return e.Loc
}

func testOptions(out string) Options {
	return Options{Out: out, BaseURL: testBase, MaxEntries: 5, MaxBytes: 16 << 10, Copies: true}
}

// TestPublish: a Source with two resource sets (one of OAI-PMH
// identifiers), lists past the thresholds, change lists per period, read
// back strictly; a second run rewrites nothing, and a change rewrites only
// the documents it changes.
func TestPublish(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.put("http://a.example/rs", 0, 12, state.ChangeCreated, "one")
	f.put("http://oai.example/oai", 0, 3, state.ChangeCreated, "<x/>")
	f.del("http://a.example/rs", 11)
	out := t.TempDir()
	o := testOptions(out)
	res, err := Publish(ctx, FromState(f.st), o)
	if err != nil {
		t.Fatal(err)
	}
	o.MaxEntries, o.MaxBytes = 5, 16<<10
	src := readSource(t, out, o)
	schematest.Validate(t, filepath.Join(out, Current))
	if len(src.sets) != 2 || res.Sets != 2 || res.Resources != 14 || res.Changes != 16 {
		t.Fatalf("published %+v, read %d sets", res, len(src.sets))
	}
	a := src.sets["http://a.example/rs"]
	if a == nil {
		t.Fatalf("no set described by its source: %v", src.sets)
	}
	if len(a.resources) != 11 || len(a.changes) != 13 || a.open != 1 {
		t.Errorf("set a: %d resources, %d changes, %d open lists; want 11, 13, 1", len(a.resources), len(a.changes), a.open)
	}
	e := a.resources[uri("http://a.example/rs", 3)]
	if e.Metadata.Length != 3 || e.Metadata.Type != "text/plain" || !e.Metadata.Hashes.Equal(sum("one")) {
		t.Errorf("entry %+v lost its length, type or hash", e)
	}
	// The copies served, the entry is an aggregator's (section 14.8 of
	// the specification): its loc the copy, under its set's directory (as
	// its Capability List), and one link, via, to the original with the
	// original's hash, length and type.
	setDir := strings.TrimSuffix(strings.TrimPrefix(e.Loc, testBase+"/"), "/"+CopyPath(uri("http://a.example/rs", 3)))
	via, ok := e.Link("via")
	if !ok || len(e.Links) != 1 || !strings.HasPrefix(setDir, "sets/") || strings.Contains(strings.TrimPrefix(setDir, "sets/"), "/") ||
		e.Loc != testBase+"/"+setDir+"/"+CopyPath(uri("http://a.example/rs", 3)) ||
		via.Href != uri("http://a.example/rs", 3) || !via.Hashes.Equal(sum("one")) || via.Length != 3 || via.Type != "text/plain" || !via.Modified.Equal(e.Lastmod) {
		t.Errorf("entry %+v: want its loc the copy's, and a via link to the original", e)
	}
	// A deletion names the copy it was published under: a destination
	// that synced from rsharvest deletes what it holds.
	last := a.changes[len(a.changes)-1]
	if last.Metadata.Change != manifest.Deleted || original(last) != uri("http://a.example/rs", 11) ||
		last.Loc != testBase+"/"+setDir+"/"+CopyPath(uri("http://a.example/rs", 11)) {
		t.Errorf("last change %+v, want the deletion of the copy", last)
	}
	// A change's lastmod is its version's, as the Resource List gives it;
	// its datetime is the stamp the destination recorded; every change is
	// of the copy, with one via link.
	for _, c := range a.changes[:len(a.changes)-1] {
		if r, ok := a.resources[original(c)]; ok && (!c.Lastmod.Equal(r.Lastmod) || !c.Metadata.Datetime.After(c.Lastmod) || c.Loc != r.Loc) {
			t.Errorf("change of %s: lastmod %s, datetime %s; want the resource's lastmod %s, and the stamp", c.Loc, c.Lastmod, c.Metadata.Datetime, r.Lastmod)
		}
		if _, ok := c.Link("via"); !ok || len(c.Links) != 1 || !strings.HasPrefix(c.Loc, testBase+"/"+setDir+"/") {
			t.Errorf("change %+v: want the copy's loc and one via link", c)
		}
	}
	oai := src.sets["http://oai.example/oai"]
	if oai == nil || len(oai.resources) != 3 {
		t.Fatalf("the OAI-PMH set: %+v", oai)
	}
	if _, ok := oai.resources["oai:example.org:1"]; !ok {
		t.Errorf("OAI-PMH identifiers are not the locs: %v", oai.resources)
	}

	// Nothing changed: nothing rewritten, every document kept.
	res2, err := Publish(ctx, FromState(f.st), o)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Written != 0 || res2.Kept != src.docs {
		t.Errorf("second run wrote %d and kept %d documents, want 0 and %d", res2.Written, res2.Kept, src.docs)
	}
	// One more change: the open change list changes, and set a's resource
	// lists, whose at moves (its index and three pages; each set's at is
	// its own newest change, so the OAI-PMH set's list stays); nothing
	// else (a change another supersedes keeps its entry: the copy's URI,
	// the version it made).
	f.put("http://a.example/rs", 0, 1, state.ChangeUpdated, "two")
	res3, err := Publish(ctx, FromState(f.st), o)
	if err != nil {
		t.Fatal(err)
	}
	src3 := readSource(t, out, o)
	if n := len(src3.sets["http://a.example/rs"].changes); n != 14 {
		t.Errorf("after one change: %d changes listed, want 14", n)
	}
	if res3.Written != 5 {
		t.Errorf("after one change %d documents were written (of %d), want 5", res3.Written, src.docs)
	}
	if ents, _ := os.ReadDir(filepath.Join(out, genDir)); len(ents) != 2 {
		t.Errorf("generations kept: %d, want 2 (the published one and the one before)", len(ents))
	}
}

// TestChangePeriods: closed periods have until and the current one is open;
// a period with more changes than a document holds is split.
func TestChangePeriods(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.put("http://a.example/rs", 0, 7, state.ChangeCreated, "x")
	now := time.Now().UTC()
	out := t.TempDir()
	o := testOptions(out)
	o.ChangePeriod = time.Hour
	// Three days later by the publisher's clock, but no change is stamped
	// after the changes' period: the state could still stamp one into it
	// (a clock that ran ahead is set back), so it stays open, and no
	// empty list follows it.
	o.Now = func() time.Time { return now.Add(72 * time.Hour) }
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	o.MaxBytes = 16 << 10
	src := readSource(t, out, o)
	a := src.sets["http://a.example/rs"]
	if len(a.changes) != 7 || a.open != 1 {
		t.Errorf("%d changes, %d open lists; want 7 and 1 (the changes' period's second page)", len(a.changes), a.open)
	}
	h, pages := readDoc(t, filepath.Join(out, Current), testBase+"/sets/"+slug("http://a.example/rs")+"/changelist-index.xml", o)
	if !h.IsIndex() || len(pages) != 2 {
		t.Fatalf("change list index with %d pages, want 2 (two of one period)", len(pages))
	}
	if pages[0].Metadata.Until.IsZero() || !pages[0].Metadata.Until.Equal(pages[1].Metadata.From) || !pages[1].Metadata.Until.IsZero() {
		t.Errorf("page bounds: %+v", pages)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, base := range []string{"", "/pub", "pub.example/x", "ftp://h/x", "http:///x", "http://h/x?y=1"} {
		_, err := Publish(ctx, FromState(f.st), Options{Out: t.TempDir(), BaseURL: base})
		if !errors.Is(err, ErrBadBaseURL) {
			t.Errorf("base URL %q: %v", base, err)
		}
	}
	for _, p := range []string{"", "0d", "x", "500ms", "1.5d"} {
		if _, err := ParsePeriod(p); err == nil {
			t.Errorf("period %q accepted", p)
		}
	}
	for p, want := range map[string]time.Duration{"1d": 24 * time.Hour, "2w": 14 * 24 * time.Hour, "90m": 90 * time.Minute} {
		if d, err := ParsePeriod(p); err != nil || d != want {
			t.Errorf("period %q = %v, %v", p, d, err)
		}
	}
}

// failing is Holdings that fail partway through the resources of a set.
type failing struct {
	Holdings
	after int
}

func (h failing) View(ctx context.Context, fn func(View) error) error {
	return h.Holdings.View(ctx, func(v View) error { return fn(failingView{v, h.after}) })
}

type failingView struct {
	View
	after int
}

func (v failingView) Resources(ctx context.Context, src string, fn func(state.Resource) error) error {
	n := 0
	return v.View.Resources(ctx, src, func(r state.Resource) error {
		if n++; n > v.after {
			return errors.New("the holdings failed")
		}
		return fn(r)
	})
}

// TestFailureKeepsPublished: a run that fails, whether its holdings fail or
// the disk is full, leaves the published set as it was.
func TestFailureKeepsPublished(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.put("http://a.example/rs", 0, 4, state.ChangeCreated, "x")
	mnt := t.TempDir()
	if out, err := runMount(mnt); err != nil {
		t.Fatalf("mount a 256 KiB tmpfs for the full-disk case (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = runUmount(mnt) })
	o := testOptions(mnt)
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, mnt)
	f.put("http://a.example/rs", 4, 2000, state.ChangeCreated, "y")
	for name, h := range map[string]Holdings{"failing holdings": failing{FromState(f.st), 3}, "full disk": FromState(f.st)} {
		_, err := Publish(ctx, h, o)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if name == "full disk" && !strings.Contains(err.Error(), "no space left") {
			t.Errorf("full disk: error %v does not say so", err)
		}
		if after := snapshot(t, mnt); after != before {
			t.Errorf("%s: the published set changed:\n%s\nwant\n%s", name, after, before)
		}
		if ents, _ := os.ReadDir(filepath.Join(mnt, genDir)); len(ents) != 1 {
			t.Errorf("%s: %d generations left, want the published one", name, len(ents))
		}
	}
}

// snapshot describes the published set: each document's path and bytes.
func snapshot(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	cur := filepath.Join(out, Current)
	err := filepath.WalkDir(cur+"/", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %x\n", strings.TrimPrefix(p, cur), md5.Sum(data))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPublishURIs: locs and hrefs that are not URIs as the origin wrote
// them (spaces, non-ASCII, characters a URI may not hold, a lone "%") are
// published as URIs by RFC 3987's mapping; escapes the origin wrote stay.
func TestPublishURIs(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	src := "http://a.example/rs"
	raw := []string{
		src + "/odd/sub dir/café über.txt",
		src + "/odd/{braces}|pipe^caret`tick\"quote\".txt",
		src + "/odd/100%.txt",
		src + "/odd/already%20escaped%C3%A9.txt",
		src + "/odd/query?a=1&b=two words",
		src + "/odd/" + strings.Repeat("ü", 200) + ".txt",
	}
	var b state.Batch
	for _, u := range raw {
		b.Resources = append(b.Resources, state.Resource{URI: u, Source: src, Length: 3, Hashes: sum("one"), Type: "text/plain",
			Outcome: state.OutcomeWritten, RunID: f.run, Links: []state.Link{{Rel: "describedby", Href: "http://a.example/meta data/" + "é.xml"}}})
		b.Changes = append(b.Changes, state.ChangeRecord{URI: u, Source: src, Change: state.ChangeCreated, Length: 3, Hashes: sum("one"), RunID: f.run})
	}
	// A second source whose harvest recorded no description of its own.
	b.Resources = append(b.Resources, state.Resource{URI: "oai:b.example:1", Source: "http://b.example/oai", Length: 3, Hashes: sum("one"),
		Outcome: state.OutcomeWritten, RunID: f.run})
	if err := f.st.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.described(src, src)
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries = 100
	o.Copies = false // the origin's URIs and links as they are
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	pub := readSource(t, out, o) // every loc and href checked a URI
	schematest.Validate(t, filepath.Join(out, Current))
	set := pub.sets[src]
	if set == nil || len(set.resources) != len(raw) || len(set.changes) != len(raw) {
		t.Fatalf("published %+v", set)
	}
	// The set without a description recorded links none (readSource
	// names it by its Capability List then).
	if len(pub.sets) != 2 {
		t.Errorf("%d sets published, want 2", len(pub.sets))
	}
	for name := range pub.sets {
		if name != src && !strings.HasPrefix(name, testBase+"/sets/") {
			t.Errorf("a set is described by %q, which no harvest recorded", name)
		}
	}
	for _, u := range raw {
		e, ok := set.resources[manifest.ToURI(u)]
		if !ok {
			t.Errorf("%q is not listed as %q", u, manifest.ToURI(u))
			continue
		}
		if l, ok := e.Link("describedby"); !ok || l.Href != "http://a.example/meta%20data/%C3%A9.xml" {
			t.Errorf("%s: describedby %+v", e.Loc, l)
		}
	}
	if _, ok := set.resources[src+"/odd/already%20escaped%C3%A9.txt"]; !ok {
		t.Errorf("an escape the origin wrote was not kept")
	}
}

// TestDestinationFromLists: a destination written here — not rsharvest —
// baselines from a published Resource List, then applies, in order, the
// entries of a later publication's Change Lists whose datetime is after
// that list's at; it ends holding exactly what rsharvest holds, for
// creates, updates (one resource twice) and deletes (one just created),
// with many changes recorded within one millisecond (a commit stamps its
// changes a microsecond apart).
func TestDestinationFromLists(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	src := "http://a.example/rs"
	f.put(src, 0, 10, state.ChangeCreated, "v1")
	out := t.TempDir()
	o := testOptions(out)
	o.MaxEntries, o.MaxBytes = 1000, 1<<20
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	first := readSource(t, out, o).sets[src]
	held := map[string]string{} // the destination: loc → hashes
	for _, e := range first.resources {
		held[e.Loc] = e.Metadata.Hashes.String()
	}

	f.put(src, 3, 2, state.ChangeUpdated, "v2")
	f.del(src, 5)
	f.put(src, 10, 4, state.ChangeCreated, "v1")
	f.put(src, 3, 1, state.ChangeUpdated, "v3")
	f.del(src, 12)
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	second := readSource(t, out, o).sets[src]
	applied, sameMilli := 0, 0
	var prev time.Time
	for _, c := range second.changes {
		dt := c.Metadata.Datetime
		if !dt.After(first.at) {
			continue
		}
		if !prev.IsZero() && dt.Truncate(time.Millisecond).Equal(prev.Truncate(time.Millisecond)) {
			sameMilli++
		}
		prev = dt
		applied++
		switch c.Metadata.Change {
		case manifest.Created, manifest.Updated:
			held[c.Loc] = c.Metadata.Hashes.String()
		case manifest.Deleted:
			delete(held, c.Loc)
		}
	}
	if applied != 9 || sameMilli == 0 {
		t.Errorf("applied %d changes after %s (want 9), %d in the millisecond of the one before (want some)", applied, first.at, sameMilli)
	}
	want := map[string]string{} // what rsharvest holds, by the URI it publishes it at
	if err := f.st.WalkResources(ctx, src, func(r state.Resource) error {
		if !r.Deleted {
			want[second.resources[manifest.ToURI(r.URI)].Loc] = r.Hashes.String()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(held) != len(want) || len(want) != 12 {
		t.Errorf("the destination holds %d resources, rsharvest %d (want 12)", len(held), len(want))
	}
	for loc, h := range want {
		if held[loc] != h {
			t.Errorf("%s: the destination holds %q, rsharvest %q", loc, held[loc], h)
		}
	}
}

// TestSetNames: a source's resource set is published under the name of the
// registry site that harvests it; a source no site harvests, and sources
// that claim one site, under a readable form of the source with a digest.
func TestSetNames(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	for _, s := range []struct{ src, site string }{
		{"http://a.example/rs", "Corpus A"},
		{"http://b.example/rs", "twin"}, {"http://c.example/rs", "twin"},
		{"http://d.example/rs", "d-0badcafe"},
		{"http://e.example/rs", ""},
	} {
		if _, err := f.st.BeginRun(ctx, state.Run{Mode: "baseline", Source: s.src, Site: s.site}); err != nil {
			t.Fatal(err)
		}
		f.put(s.src, 0, 1, state.ChangeCreated, "one")
	}
	out := t.TempDir()
	o := testOptions(out)
	if _, err := Publish(ctx, FromState(f.st), o); err != nil {
		t.Fatal(err)
	}
	pub := readSource(t, out, o)
	want := map[string]string{
		"http://a.example/rs": "sets/corpus-a/", "http://d.example/rs": "sets/d-0badcafe_/",
		"http://b.example/rs": "sets/b-example-rs-", "http://c.example/rs": "sets/c-example-rs-", "http://e.example/rs": "sets/e-example-rs-",
	}
	_, caps := readDoc(t, filepath.Join(out, Current), o.BaseURL+"/"+WellKnown, o)
	for _, c := range caps {
		l, _ := c.Link("describedby")
		if w, ok := want[l.Href]; !ok || !strings.HasPrefix(c.Loc, o.BaseURL+"/"+w) {
			t.Errorf("the set of %s is published at %s, want under %s", l.Href, c.Loc, w)
		}
	}
	if len(pub.sets) != len(want) {
		t.Errorf("%d sets published, want %d", len(pub.sets), len(want))
	}
}
