package pipeline_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/state"
)

// Sources written the way real producers write them, as raw text (the
// project's own writer never writes these forms): hash-less and
// length-less entries, datetimes that are not W3C Datetimes, and a Source
// Description with one broken resource set.

const (
	sitemapOpen = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">` + "\n"
	sitemapClose = "</urlset>\n"
	// srcBase is where a test source's documents live; the test server
	// replaces PORTX with its port.
	srcBase = "http://127.0.0.1:PORTX/"
)

// srcFile is one file of a hand-written source.
type srcFile struct {
	name string
	body []byte
}

// writeRaw writes files under dir.
func writeRaw(t *testing.T, dir string, files ...srcFile) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// doc is a ResourceSync document with the given capability, root rs:md
// attributes and entries (raw XML).
func doc(capability, attrs string, entries ...string) []byte {
	return []byte(sitemapOpen + `<rs:md capability="` + capability + `" ` + attrs + `/>` + "\n" +
		strings.Join(entries, "\n") + "\n" + sitemapClose)
}

// zipOf writes a package with the manifest first, then the entries.
func zipOf(t *testing.T, manifestXML []byte, entries map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	add("manifest.xml", manifestXML)
	for name, b := range entries {
		add(name, b)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hexMD5(b []byte) string    { s := md5.Sum(b); return hex.EncodeToString(s[:]) }
func hexSHA256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
func hexSHA512(b []byte) string { s := sha512.Sum512(b); return hex.EncodeToString(s[:]) }

// oddDump is a Resource Dump of one package whose manifest gives some
// resources no hash (a length only, or nothing), one only sha-512, one a
// wrong sha-512, with datetimes in the forms real producers write.
type oddDump struct {
	bodies  map[string][]byte // URI → body
	lastmod map[string]time.Time
	bad     string // the URI whose sha-512 is wrong
}

func writeOddDump(t *testing.T, dir string) oddDump {
	t.Helper()
	const uri = "http://example.org/odd/"
	d := oddDump{bodies: map[string][]byte{}, lastmod: map[string]time.Time{}, bad: uri + "wrong-sha512"}
	type res struct {
		name, lastmod, md string
		when              time.Time
	}
	mk := func(name string) []byte { return bytes.Repeat([]byte(name+" "), 200) }
	var entries []string
	files := map[string][]byte{}
	for _, r := range []res{
		{"hashed", "2013-01-02 10:00:00", "hash=\"md5:%[1]s sha-256:%[2]s\" length=\"%[3]d\"", time.Date(2013, 1, 2, 10, 0, 0, 0, time.UTC)},
		{"length-only", "2013-01-02T10:00:00+0530", "length=\"%[3]d\"", time.Date(2013, 1, 2, 4, 30, 0, 0, time.UTC)},
		{"nothing", "Wed, 02 Jan 2013 10:00:00 GMT", "", time.Date(2013, 1, 2, 10, 0, 0, 0, time.UTC)},
		{"sha512-only", "2013-13-45T99:99Z", "hash=\"sha-512:%[4]s\"", time.Time{}},
		{"wrong-sha512", "2013-01-02T10:00:00Z", "hash=\"sha-512:%[5]s\"", time.Date(2013, 1, 2, 10, 0, 0, 0, time.UTC)},
	} {
		body := mk(r.name)
		md := r.md
		if md != "" {
			md = fmt.Sprintf(md, hexMD5(body), hexSHA256(body), len(body), hexSHA512(body), hexSHA512(append(body, 'x')))
		}
		entries = append(entries, fmt.Sprintf(`<url><loc>%s%s</loc><lastmod>%s</lastmod><rs:md path="/r/%s" %s/></url>`, uri, r.name, r.lastmod, r.name, md))
		files["r/"+r.name] = body
		if uri+r.name != d.bad {
			d.bodies[uri+r.name] = body
			d.lastmod[uri+r.name] = r.when
		}
	}
	man := doc("resourcedump-manifest", `at="2013-01-03T00:00:00Z"`, entries...)
	pkg := zipOf(t, man, files)
	writeRaw(t, dir,
		srcFile{"capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+`resourcedump.xml</loc><rs:md capability="resourcedump"/></url>`)},
		srcFile{"resourcedump.xml", doc("resourcedump", `at="2013-01-03T00:00:00"`,
			fmt.Sprintf(`<url><loc>%spart1.zip</loc><rs:md type="application/zip" length="%d" at="2013-01-03 00:00:00"/></url>`, srcBase, len(pkg)))},
		srcFile{"part1.zip", pkg},
	)
	return d
}

// TestHashlessResourcesAccepted: resources a manifest gives no usable hash
// are delivered by default after their length and CRC-32 checks, counted
// as unverified, and the state records the check each passed; sha-512 is
// verified; --require-hash refuses the hash-less ones. Datetimes that are
// not W3C Datetimes do not fail a resource whose body verifies.
func TestHashlessResourcesAccepted(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name        string
		streaming   bool
		requireHash bool
	}{
		{"streamed", true, false},
		{"spooled", false, false},
		{"require-hash", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d := writeOddDump(t, dir)
			srv := serve(t, dir)
			h := newHarness(t)
			rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", func(o *pipeline.Options) {
				o.DisableStreaming = !tt.streaming
				o.RequireHash = tt.requireHash
			})
			if rep.Status != runreport.StatusPartial {
				t.Fatalf("status %s, want partial (one wrong sha-512)\n%s\n%+v", rep.Status, rep.Summary(), rep.Failures)
			}
			failed := map[string]string{}
			for _, f := range rep.Failures {
				failed[f.URI] = f.Error
			}
			if !strings.Contains(failed[d.bad], "sha-512") {
				t.Errorf("wrong sha-512: failure %q, want one naming sha-512", failed[d.bad])
			}
			hashless := []string{"http://example.org/odd/length-only", "http://example.org/odd/nothing"}
			held := h.held(ctx)
			for uri, body := range d.bodies {
				refused := tt.requireHash && (uri == hashless[0] || uri == hashless[1])
				if refused {
					if _, ok := held[uri]; ok || !strings.Contains(failed[uri], "--require-hash") {
						t.Errorf("%s: held=%v failure %q; want it refused by --require-hash", uri, ok, failed[uri])
					}
					continue
				}
				if !bytes.Equal(held[uri], body) {
					t.Errorf("%s not delivered intact (failure: %s)", uri, failed[uri])
				}
				rec, ok, err := recordOf(ctx, h.store, uri)
				if err != nil || !ok {
					t.Fatalf("%s: no state record (%v)", uri, err)
				}
				want := map[string]string{
					"http://example.org/odd/hashed":      state.VerifiedHash,
					"http://example.org/odd/length-only": state.VerifiedLengthCRC,
					"http://example.org/odd/nothing":     state.VerifiedCRC,
					"http://example.org/odd/sha512-only": state.VerifiedHash,
				}[uri]
				if rec.Verified != want {
					t.Errorf("%s: state says verified by %q, want %q", uri, rec.Verified, want)
				}
				if !rec.Lastmod.Equal(d.lastmod[uri]) {
					t.Errorf("%s: lastmod %v, want %v", uri, rec.Lastmod, d.lastmod[uri])
				}
			}
			wantUnverified := int64(2)
			if tt.requireHash {
				wantUnverified = 0
			}
			if rep.Resources.Unverified != wantUnverified {
				t.Errorf("resources.unverified = %d, want %d\n%s", rep.Resources.Unverified, wantUnverified, rep.Summary())
			}
			if !tt.requireHash && !strings.Contains(rep.Summary(), "unverified: 2") {
				t.Errorf("summary does not count the unverified resources:\n%s", rep.Summary())
			}
		})
	}
}

// TestListWithoutFixity: a basic Resource List gives only <loc> (or a
// length), with odd lastmods: every resource is delivered, and the state
// says what was checked.
func TestListWithoutFixity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := []byte("only a loc"), []byte("a loc and a length")
	writeRaw(t, dir,
		srcFile{"capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+`resourcelist.xml</loc><rs:md capability="resourcelist"/></url>`)},
		srcFile{"resourcelist.xml", doc("resourcelist", `at="2016-01-01 00:00:00"`,
			`<url><loc>`+srcBase+`r/a</loc></url>`,
			fmt.Sprintf(`<url><loc>%sr/b</loc><lastmod>2015-12-31T08:00:00+0100</lastmod><rs:md length="%d"/></url>`, srcBase, len(b)))},
		srcFile{"r/a", a}, srcFile{"r/b", b},
	)
	srv := serve(t, dir)
	h := newHarness(t)
	rep := h.baseline(ctx, srv.URL+"capabilitylist.xml", nil)
	if rep.Status != runreport.StatusOK || rep.Resources.Written != 2 || rep.Resources.Unverified != 2 {
		t.Fatalf("%s", rep.Summary())
	}
	base := srv.URL
	for uri, want := range map[string]string{base + "r/a": state.VerifiedNone, base + "r/b": state.VerifiedLength} {
		rec, ok, err := recordOf(ctx, h.store, uri)
		if err != nil || !ok || rec.Verified != want {
			t.Errorf("%s: %+v %v %v; want verified %q", uri, rec, ok, err, want)
		}
	}
	rec, _, _ := recordOf(ctx, h.store, base+"r/b")
	if want := time.Date(2015, 12, 31, 7, 0, 0, 0, time.UTC); !rec.Lastmod.Equal(want) {
		t.Errorf("lastmod %v, want %v", rec.Lastmod, want)
	}
	if cp, ok, err := h.store.Checkpoint(ctx, srv.URL+"capabilitylist.xml", srv.URL+"capabilitylist.xml"); err != nil || !ok ||
		!cp.Next.Equal(time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("checkpoint %+v %v %v, want the list's at, read leniently", cp, ok, err)
	}
}

// TestChangeListBadDatetime: in a Change List the time orders the changes,
// so a change whose datetime cannot be read fails alone, with an error
// naming it; a datetime in a lenient form is used; the other changes apply.
func TestChangeListBadDatetime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	x, z := []byte("x, updated"), []byte("z, created")
	entry := func(name, lastmod, change string, body []byte) string {
		return fmt.Sprintf(`<url><loc>%sr/%s</loc><lastmod>%s</lastmod><rs:md change="%s" hash="md5:%s" length="%d"/></url>`,
			srcBase, name, lastmod, change, hexMD5(body), len(body))
	}
	writeRaw(t, dir,
		srcFile{"capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+`changelist.xml</loc><rs:md capability="changelist"/></url>`)},
		srcFile{"changelist.xml", doc("changelist", `from="2016-01-01T00:00:00Z"`,
			entry("x", "2016-01-02 00:00:00", "updated", x),
			entry("y", "the second of January", "updated", []byte("y")),
			entry("z", "2016-01-03T00:00:00Z", "created", z))},
		srcFile{"r/x", x}, srcFile{"r/y", []byte("y")}, srcFile{"r/z", z},
	)
	srv := serve(t, dir)
	h := newHarness(t)
	opts := h.options(srv.URL + "capabilitylist.xml")
	rep, err := pipeline.Incremental(ctx, opts, pipeline.Range{From: time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != runreport.StatusPartial || rep.Resources.Written != 2 {
		t.Fatalf("%s", rep.Summary())
	}
	var found bool
	for _, f := range rep.Failures {
		if f.URI == srv.URL+"r/y" {
			found = true
			if !strings.Contains(f.Error, "datetime") || !strings.Contains(f.Error, "lastmod") {
				t.Errorf("failure %q does not say the datetime is the problem", f.Error)
			}
		} else {
			t.Errorf("unexpected failure %+v", f)
		}
	}
	if !found {
		t.Errorf("no failure for the change with the unusable datetime: %+v", rep.Failures)
	}
	held := h.held(ctx)
	if !bytes.Equal(held[srv.URL+"r/x"], x) || !bytes.Equal(held[srv.URL+"r/z"], z) || held[srv.URL+"r/y"] != nil {
		t.Errorf("held: %v", keys(held))
	}
	rec, _, _ := recordOf(ctx, h.store, srv.URL+"r/x")
	if want := time.Date(2016, 1, 2, 0, 0, 0, 0, time.UTC); !rec.ChangeTime.Equal(want) {
		t.Errorf("change time of x %v, want %v", rec.ChangeTime, want)
	}
}

// TestBrokenResourceSet: a Source Description lists four resource sets;
// one's Capability List is missing, and another's Resource Dump breaks
// after its first package. Every other set is synced and checkpointed, each
// broken one is recorded as a failure of that set with no checkpoint, and
// the run ends partial — the same way every time.
func TestBrokenResourceSet(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	setDump := func(set string, n int, truncate bool) (map[string][]byte, []srcFile) {
		bodies := map[string][]byte{}
		var pkgs []string
		var files []srcFile
		for p := range n {
			var entries []string
			content := map[string][]byte{}
			for i := range 3 {
				uri := fmt.Sprintf("http://example.org/%s/%d/%d", set, p, i)
				body := []byte(strings.Repeat(uri+" ", 50))
				bodies[uri] = body
				name := fmt.Sprintf("r/%d", i)
				content[name] = body
				entries = append(entries, fmt.Sprintf(`<url><loc>%s</loc><rs:md path="/%s" hash="md5:%s" length="%d"/></url>`, uri, name, hexMD5(body), len(body)))
			}
			zb := zipOf(t, doc("resourcedump-manifest", `at="2017-01-01T00:00:00Z"`, entries...), content)
			name := fmt.Sprintf("%s/part%d.zip", set, p)
			files = append(files, srcFile{name, zb})
			pkgs = append(pkgs, fmt.Sprintf(`<url><loc>%s%s</loc><rs:md type="application/zip" length="%d"/></url>`, srcBase, name, len(zb)))
		}
		dump := string(doc("resourcedump", `at="2017-01-01T00:00:00Z"`, pkgs...))
		if truncate {
			// The document breaks after its first package.
			dump = dump[:strings.Index(dump, pkgs[0])+len(pkgs[0])] + "<url><loc>"
		}
		files = append(files,
			srcFile{set + "/capabilitylist.xml", doc("capabilitylist", "", `<url><loc>`+srcBase+set+`/resourcedump.xml</loc><rs:md capability="resourcedump"/></url>`)},
			srcFile{set + "/resourcedump.xml", []byte(dump)})
		return bodies, files
	}
	good := map[string][]byte{}
	var desc []string
	var files []srcFile
	for _, set := range []string{"a", "missing", "truncated", "d"} {
		desc = append(desc, `<url><loc>`+srcBase+set+`/capabilitylist.xml</loc><rs:md capability="capabilitylist"/></url>`)
		bodies, fs := setDump(set, 2, set == "truncated")
		switch set {
		case "missing":
			continue // its capability list is never written
		case "a", "d":
			for k, v := range bodies {
				good[k] = v
			}
		}
		files = append(files, fs...)
	}
	files = append(files, srcFile{".well-known/resourcesync", doc("description", "", desc...)})
	writeRaw(t, dir, files...)
	srv := serve(t, dir)

	var first string
	for i := range 20 {
		h := newHarness(t)
		rep := h.baseline(ctx, srv.URL, nil)
		var outcome []string
		outcome = append(outcome, rep.Status, fmt.Sprint(rep.Resources.Written))
		for _, f := range rep.Failures {
			outcome = append(outcome, f.URI+" "+f.Stage)
		}
		if i == 0 {
			first = strings.Join(outcome, "\n")
			if rep.Status != runreport.StatusPartial {
				t.Fatalf("status %s, want partial\n%s", rep.Status, rep.Summary())
			}
			broken := map[string]bool{srv.URL + "missing/capabilitylist.xml": false, srv.URL + "truncated/capabilitylist.xml": false}
			for _, f := range rep.Failures {
				if _, ok := broken[f.URI]; ok && f.Stage == "resource set" {
					broken[f.URI] = true
				}
			}
			for set, seen := range broken {
				if !seen {
					t.Errorf("no failure recorded for the broken set %s: %+v", set, rep.Failures)
				}
			}
			held := h.held(ctx)
			for uri, body := range good {
				if !bytes.Equal(held[uri], body) {
					t.Errorf("%s of a sound set not delivered", uri)
				}
			}
			for _, set := range []string{"a", "missing", "truncated", "d"} {
				cl := srv.URL + set + "/capabilitylist.xml"
				_, ok, err := h.store.Checkpoint(ctx, srv.URL, cl)
				if err != nil {
					t.Fatal(err)
				}
				if want := set == "a" || set == "d"; ok != want {
					t.Errorf("set %s: checkpoint recorded = %v, want %v", set, ok, want)
				}
			}
		} else if got := strings.Join(outcome, "\n"); got != first {
			t.Fatalf("run %d ended differently:\n%s\nfirst run:\n%s", i+1, got, first)
		}
	}

	// A re-sync skips the sound sets' packages, delivered in full before,
	// though the run that delivered them was partial.
	h := newHarness(t)
	h.baseline(ctx, srv.URL, nil)
	rep := h.baseline(ctx, srv.URL, nil)
	if rep.Packages.Done < 4 || rep.Bytes.Downloaded != 0 {
		t.Errorf("re-sync: %d packages done, %d bytes downloaded; want the sound sets' 4 packages skipped\n%s", rep.Packages.Done, rep.Bytes.Downloaded, rep.Summary())
	}
}

func TestSourceErrorNamesTheSourceOnce(t *testing.T) {
	const u = "http://example.org/capabilitylist.xml"
	for _, tt := range []struct {
		cause error
		want  string
	}{
		{fmt.Errorf("giving up after 3 attempts: GET %s: connection refused", u), "source unreadable: giving up after 3 attempts: GET " + u + ": connection refused"},
		{fmt.Errorf("not a ResourceSync document"), "source " + u + " unreadable: not a ResourceSync document"},
	} {
		if got := (&pipeline.SourceError{URL: u, Err: tt.cause}).Error(); got != tt.want || strings.Count(got, u) != 1 {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
