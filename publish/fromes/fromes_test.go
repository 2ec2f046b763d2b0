package fromes

import (
	"bytes"
	"cmp"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/manifest"
	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/publish/holdingstest"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/es"
	"github.com/rsharvest/rsharvest/sink/es/zinctest"
	"github.com/rsharvest/rsharvest/state"
)

// op is a Put (with body) or a Delete of the es sink.
type op struct {
	del  bool
	r    sink.Resource
	body string
}

func put(uri, body string) op {
	return op{r: sink.Resource{URI: uri, Length: int64(len(body))}, body: body}
}

func del(uri string) op { return op{del: true, r: sink.Resource{URI: uri}} }

// write applies ops through a new es sink on index and closes it.
func write(t *testing.T, z *zinctest.Server, opts es.Options, ops []op) {
	t.Helper()
	opts.URL, opts.Username, opts.Password = z.URL, zincUser, zincPassword
	s, err := es.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("es.New: %v", err)
	}
	for _, o := range ops {
		if o.del {
			err = s.Delete(t.Context(), o.r.URI)
		} else {
			r := o.r
			err = s.Put(t.Context(), &r, strings.NewReader(o.body))
		}
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("closing the sink: %v", err)
	}
}

// openHoldings opens spec with a page size, without retries.
func openHoldings(t *testing.T, spec string, page int) *Holdings {
	t.Helper()
	h, err := open(t.Context(), spec, es.ReaderOptions{PageSize: page, Retries: -1})
	if err != nil {
		t.Fatalf("open %s: %v", spec, err)
	}
	return h
}

// settle waits until ZincSearch shows resources and changes documents
// (the sink waits for its resource documents only).
func settle(t *testing.T, h *Holdings, resources, changes int64) {
	t.Helper()
	var st es.Stats
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = h.r.Stats(t.Context()); err != nil {
			t.Fatal(err)
		}
		if st.Resources == resources && st.Changes == changes {
			return
		}
	}
	t.Fatalf("the indexes show %d resources and %d changes, want %d and %d", st.Resources, st.Changes, resources, changes)
}

// docID is the es sink's _id of uri (the walk's order).
func docID(uri string) string {
	if uri != "" && len(uri) <= 512 && utf8.ValidString(uri) {
		return uri
	}
	sum := sha256.Sum256([]byte(uri))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// held is what the model expects of a resource.
type held struct {
	r   state.Resource
	seq int // the op that wrote it
}

// model applies ops: the resources held in walk order, and the changes
// (Recorded left zero) in the order recorded.
func model(ops []op, source string) ([]state.Resource, []state.ChangeRecord) {
	hold := map[string]held{}
	type change struct {
		c   state.ChangeRecord
		seq int
	}
	var changes []change
	for i, o := range ops {
		if o.del {
			delete(hold, o.r.URI)
			changes = append(changes, change{state.ChangeRecord{URI: o.r.URI, Change: state.ChangeDeleted, Source: source, Length: -1}, i})
			continue
		}
		h := o.r.Hashes
		if h.MD5 == nil {
			sum := md5.Sum([]byte(o.body))
			h.MD5 = sum[:]
		}
		if h.SHA256 == nil {
			sum := sha256.Sum256([]byte(o.body))
			h.SHA256 = sum[:]
		}
		r := state.Resource{URI: o.r.URI, Source: source, ResourceSet: o.r.ResourceSet, Length: int64(len(o.body)), Hashes: h,
			Type: o.r.Type, Lastmod: o.r.Lastmod, Outcome: state.OutcomeWritten}
		for _, l := range o.r.Links {
			r.Links = append(r.Links, state.Link{Rel: l.Rel, Href: l.Href, Type: l.Type})
		}
		hold[o.r.URI] = held{r, i}
		changes = append(changes, change{state.ChangeRecord{URI: o.r.URI, Change: state.ChangeUpdated, Source: source, Length: -1}, i})
	}
	var res []state.Resource
	for _, h := range hold {
		res = append(res, h.r)
	}
	slices.SortFunc(res, func(a, b state.Resource) int { return cmp.Compare(docID(a.URI), docID(b.URI)) })
	var out []state.ChangeRecord
	for _, c := range changes {
		h, ok := hold[c.c.URI]
		switch {
		case c.c.Change == state.ChangeDeleted:
			c.c.Superseded = ok
		case ok && h.seq == c.seq:
			c.c.Length, c.c.Hashes, c.c.Type = h.r.Length, h.r.Hashes, h.r.Type
		default:
			c.c.Superseded = true
		}
		out = append(out, c.c)
	}
	return res, out
}

// testOps are the writes of TestHoldings: odd URIs (a query, spaces and
// markup; bytes that are not UTF-8; longer than an _id), published hashes,
// a type, lastmod and links, more resources than a page, an update, a
// deletion, a deletion undone, a deletion of what was never held.
func testOps(resourceSet string) []op {
	const base = "http://example.com/"
	b := put(base+"b", "beta, with published hashes")
	m, s1, s256 := md5.Sum([]byte(b.body)), sha1.Sum([]byte(b.body)), sha256.Sum256([]byte(b.body))
	b.r.Hashes = fixity.Hashes{MD5: m[:], SHA1: s1[:], SHA256: s256[:]}
	b.r.Type = "application/octet-stream"
	ops := []op{
		put(base+"a", "alpha"),
		b,
		put(base+"c", "gamma, soon deleted"),
		put(base+"odd path?x=1&y=<2>", "odd"),
		put(base+"\xff\xfenot-utf8", "not UTF-8"),
		put(base+strings.Repeat("long/", 120), "long"),
	}
	for i := range 14 {
		ops = append(ops, put(fmt.Sprintf("%sx%02d", base, i), fmt.Sprintf("body %d", i)))
	}
	again := put(base+"a", "alpha, again")
	again.r.Type, again.r.Lastmod = "text/plain", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	again.r.Links = []sink.Link{{Rel: "describedby", Href: base + "a.meta", Type: "application/xml"}, {Rel: "alternate", Href: base + "a.html"}}
	ops = append(ops, again, del(base+"c"), del(base+"x13"), put(base+"x13", "body 13, again"), del(base+"never-held"))
	for i := range ops {
		ops[i].r.ResourceSet = resourceSet
	}
	return ops
}

func TestHoldings(t *testing.T) {
	z := zincAt(t)
	tests := []struct {
		name string
		// opts configure the sink that writes; perResource is every
		// resource's ResourceSet; query is added to the spec.
		opts        es.Options
		perResource string
		query       string
		page        int
		// source is the source expected, given the resource index's URL.
		source func(url string) string
	}{
		{"the sink's resource set", es.Options{ResourceSet: "http://example.org/set1/capabilitylist.xml"}, "", "", 0,
			func(string) string { return "http://example.org/set1/capabilitylist.xml" }},
		{"a capability list per resource, paged", es.Options{}, "http://example.org/set2/capabilitylist.xml", "", 3,
			func(url string) string { return url }},
		{"the spec names it, other change index", es.Options{ChangesIndex: "log.of.changes"}, "", "?changes=log.of.changes&resource_set=named&batch=7", 2,
			func(string) string { return "named" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			index := z.NewIndex()
			if tt.opts.ChangesIndex != "" {
				tt.opts.ChangesIndex = index + "-" + tt.opts.ChangesIndex
				tt.query = strings.Replace(tt.query, "changes=", "changes="+index+"-", 1)
			}
			tt.opts.Index = index
			ops := testOps(tt.perResource)
			start := time.Now().UTC().Truncate(time.Millisecond)
			write(t, z, tt.opts, ops)
			end := time.Now().UTC()
			url := z.URL + "/" + index
			source := tt.source(url)
			wantRes, wantChanges := model(ops, source)
			for i := range wantRes {
				if tt.opts.ResourceSet != "" {
					wantRes[i].ResourceSet = tt.opts.ResourceSet
				}
			}
			h := openHoldings(t, spec(z, index)+tt.query, tt.page)
			settle(t, h, int64(len(wantRes)), int64(len(wantChanges)))

			var kept publish.View
			err := h.View(ctx, func(v publish.View) error {
				kept = v
				srcs, err := v.Sources(ctx)
				if err != nil {
					return err
				}
				if fmt.Sprint(srcs) != fmt.Sprint([]string{source}) {
					t.Errorf("Sources = %q, want [%q]", srcs, source)
				}
				n, err := v.CountResources(ctx, source)
				if err != nil {
					return err
				}
				if n != int64(len(wantRes)) {
					t.Errorf("CountResources = %d, want %d", n, len(wantRes))
				}
				var walks [2][]state.Resource
				for k := range walks {
					if err := v.Resources(ctx, source, func(r state.Resource) error {
						walks[k] = append(walks[k], r)
						return nil
					}); err != nil {
						return err
					}
				}
				if !slices.EqualFunc(walks[0], walks[1], sameResource) {
					t.Errorf("two walks of one view differ")
				}
				checkResources(t, walks[0], wantRes, start, end)

				var changes []state.ChangeRecord
				if err := v.Changes(ctx, source, true, func(c state.ChangeRecord) error {
					changes = append(changes, c)
					return nil
				}); err != nil {
					return err
				}
				checkChanges(t, changes, wantChanges, start, end)
				at, err := v.At(ctx)
				if err != nil {
					return err
				}
				if len(changes) > 0 && !at.Equal(changes[len(changes)-1].Recorded) {
					t.Errorf("At = %v, want the last change's stamp %v", at, changes[len(changes)-1].Recorded)
				}
				if err := v.Resources(ctx, "http://elsewhere.example/", func(state.Resource) error { return nil }); err == nil {
					t.Error("Resources of a source not held: no error")
				}
				return nil
			})
			if err != nil {
				t.Fatalf("View: %v", err)
			}
			if _, err := kept.Sources(ctx); !errclass.IsFatal(err) {
				t.Errorf("a view used after View returned: %v, want a fatal error", err)
			}
			holdingstest.Run(t, h, holdingstest.Want{Resources: int64(len(wantRes)), Changes: int64(len(wantChanges))})

			// The publisher over the holdings.
			out := t.TempDir()
			res, err := publish.Publish(ctx, h, publish.Options{Out: out, BaseURL: "http://127.0.0.1:1/pub"})
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if res.Sets != 1 || res.Resources != int64(len(wantRes)) || res.Changes != int64(len(wantChanges)) {
				t.Errorf("Publish = %+v, want 1 set, %d resources, %d changes", res, len(wantRes), len(wantChanges))
			}
			var want []string
			for _, r := range wantRes {
				want = append(want, manifest.ToURI(r.URI))
			}
			if got := locs(t, filepath.Join(out, publish.Current, "sets", "*", "resourcelist.xml")); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the Resource List names\n%q\nwant\n%q", got, want)
			}
			want = want[:0]
			for _, c := range wantChanges {
				want = append(want, manifest.ToURI(c.URI))
			}
			if got := locs(t, filepath.Join(out, publish.Current, "sets", "*", "changelist-[0-9]*.xml")); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the Change Lists name\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func sameResource(a, b state.Resource) bool { return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) }

// checkResources compares a walk with the model's resources; the times the
// sink sets (ChangeTime, Updated) must lie within the writes.
func checkResources(t *testing.T, got, want []state.Resource, start, end time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("Resources: %d, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g := got[i]
		if g.ChangeTime.Before(start) || g.ChangeTime.After(end) || !g.Updated.Equal(g.ChangeTime) {
			t.Errorf("resource %q: ChangeTime %v, Updated %v, want within [%v, %v]", g.URI, g.ChangeTime, g.Updated, start, end)
		}
		g.ChangeTime, g.Updated = time.Time{}, time.Time{}
		if !sameResource(g, want[i]) {
			t.Errorf("resource %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
}

// checkChanges compares a walk of changes with the model's: Recorded must
// increase strictly and lie within the writes.
func checkChanges(t *testing.T, got, want []state.ChangeRecord, start, end time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("Changes: %d, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g := got[i]
		if g.Recorded.Before(start) || g.Recorded.After(end.Add(time.Millisecond)) {
			t.Errorf("change %d (%s): Recorded %v, want within [%v, %v]", i, g.URI, g.Recorded, start, end)
		}
		if i > 0 && !g.Recorded.After(got[i-1].Recorded) {
			t.Errorf("change %d (%s): Recorded %v, not after %v", i, g.URI, g.Recorded, got[i-1].Recorded)
		}
		g.Recorded = time.Time{}
		if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", want[i]) {
			t.Errorf("change %d:\n got %+v\nwant %+v", i, g, want[i])
		}
	}
}

// locs returns the locs of the documents matching pattern (one or more),
// in order.
func locs(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no document %s (%v)", pattern, err)
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := manifest.NewReader(bytes.NewReader(data), manifest.Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, e.Loc)
		}
	}
	return out
}

// TestBadIndex: indexes the es sink did not write, and servers that
// cannot be read, give clear errors of the right class.
// putDoc writes a document of its own into index, as another program would.
func putDoc(t *testing.T, z *zinctest.Server, index, id, doc string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, z.URL+"/"+index+"/_doc/"+id, strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(zincUser, zincPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("writing %s/%s: HTTP %d", index, id, resp.StatusCode)
	}
}

func TestBadIndex(t *testing.T) {
	z := zincAt(t)
	ctx := t.Context()
	// An index of other documents, created by hand.
	handmade := z.NewIndex() + "-handmade"
	putDoc(t, z, handmade, "1", `{"title":"unrelated","n":1}`)
	// A sink's indexes.
	written := z.NewIndex()
	write(t, z, es.Options{Index: written}, []op{put("http://example.com/1", "one")})

	tests := []struct {
		name, spec string
		// mention must be in the message; class is the error's.
		mention []string
		class   errclass.Class
		notSink bool
	}{
		{"no such index", spec(z, "nosuchindex"), []string{"nosuchindex", "not written by rsharvest's es sink"}, errclass.Fatal, true},
		{"documents of another kind", spec(z, handmade), []string{handmade, "doc_id", "not written by rsharvest's es sink"}, errclass.Fatal, true},
		{"no such change index", spec(z, written) + "?changes=nosuchlog", []string{"nosuchlog", "not written by rsharvest's es sink"}, errclass.Fatal, true},
		{"the change index is another's", spec(z, written) + "?changes=" + handmade, []string{handmade, "change", "not written by rsharvest's es sink"}, errclass.Fatal, true},
		{"wrong password", strings.Replace(spec(z, written), zincPassword, "not-"+zincPassword, 1), []string{"HTTP 401", "credentials"}, errclass.Fatal, false},
		{"no server", "http://127.0.0.1:1/" + written, []string{"127.0.0.1:1"}, errclass.Retryable, false},
		{"no index in the URL", "http://127.0.0.1:1", []string{"no index"}, errclass.Fatal, false},
		{"unknown option", spec(z, written) + "?colour=blue", []string{"colour"}, errclass.Fatal, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := open(ctx, tt.spec, es.ReaderOptions{Retries: -1})
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("%v: %v", errclass.Of(err), err)
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if c := errclass.Of(err); c != tt.class {
				t.Errorf("error %q is %v, want %v", err, c, tt.class)
			}
			if errors.Is(err, es.ErrNotSink) != tt.notSink {
				t.Errorf("error %q: errors.Is(err, es.ErrNotSink) = %v, want %v", err, !tt.notSink, tt.notSink)
			}
			if strings.Contains(err.Error(), zincPassword) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}

	// A document of another kind in a sink's index: the walk fails.
	t.Run("a foreign document in the sink's index", func(t *testing.T) {
		putDoc(t, z, written, "foreign", `{"uri":"http://example.com/foreign"}`)
		h := openHoldings(t, spec(z, written), 0)
		settle(t, h, 2, 1)
		_, err := publish.Publish(ctx, h, publish.Options{Out: t.TempDir(), BaseURL: "http://127.0.0.1:1/pub"})
		if !errors.Is(err, es.ErrNotSink) || !errclass.IsPermanent(err) || !strings.Contains(err.Error(), "foreign") {
			t.Errorf("Publish = %v, want a permanent error naming the document, wrapping es.ErrNotSink", err)
		}
	})
}

// TestViewChanged: a sink writing while a view is open makes the walks,
// or else the view, fail with a retryable error wrapping es.ErrChanged.
func TestViewChanged(t *testing.T) {
	z := zincAt(t)
	ctx := t.Context()
	index := z.NewIndex()
	write(t, z, es.Options{Index: index}, []op{put("http://example.com/1", "one"), put("http://example.com/2", "two")})
	h := openHoldings(t, spec(z, index), 1)
	settle(t, h, 2, 2)
	tests := []struct {
		name string
		// op is written while the view is open; walk says whether the
		// view's fn walks the resources afterwards.
		op   op
		walk bool
	}{
		{"a resource added, walked", put("http://example.com/3", "three"), true},
		{"a resource updated, not walked", put("http://example.com/1", "one again"), false},
	}
	want := int64(2)
	changes := int64(2)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var walkErr error
			err := h.View(ctx, func(v publish.View) error {
				write(t, z, es.Options{Index: index}, []op{tt.op})
				if tt.op.r.URI == "http://example.com/3" {
					want++
				}
				changes++
				settle(t, h, want, changes)
				if tt.walk {
					srcs, err := v.Sources(ctx)
					if err != nil {
						return err
					}
					walkErr = v.Resources(ctx, srcs[0], func(state.Resource) error { return nil })
				}
				return nil
			})
			if !errors.Is(err, es.ErrChanged) || !errclass.IsRetryable(err) || !strings.Contains(err.Error(), index) {
				t.Errorf("View = %v, want a retryable error naming %s, wrapping es.ErrChanged", err, index)
			}
			if tt.walk && (!errors.Is(walkErr, es.ErrChanged) || !errclass.IsRetryable(walkErr)) {
				t.Errorf("walk = %v, want a retryable error wrapping es.ErrChanged", walkErr)
			}
		})
	}
	// Once the sink is idle, the view holds.
	if _, err := publish.Publish(ctx, h, publish.Options{Out: t.TempDir(), BaseURL: "http://127.0.0.1:1/pub"}); err != nil {
		t.Fatalf("Publish once idle: %v", err)
	}
}
