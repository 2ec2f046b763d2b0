package bench

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	stdzip "archive/zip"
)

// changeOpts is the modest configuration the change tests share.
func changeOpts(dir string) GenOptions {
	return GenOptions{Dir: dir, Resources: 200, Packages: 2, Seed: 1, MeanSize: 600,
		ChangePackages: 6, ChangesPerPackage: 30}
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("datetime %q: %v", s, err)
	}
	return tm
}

// allChanges returns ChangesIn as a slice.
func allChanges(t *testing.T, opts GenOptions) []Change {
	t.Helper()
	var cs []Change
	if err := ChangesIn(t.Context(), opts, func(c Change) error {
		cs = append(cs, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return cs
}

// digests collects uri → md5 of body from Truth or TruthAfter.
func digests(t *testing.T, walk func(fn func(uri string, body io.Reader) error) error) map[string][md5.Size]byte {
	t.Helper()
	out := make(map[string][md5.Size]byte)
	err := walk(func(uri string, body io.Reader) error {
		h := md5.New()
		if _, err := io.Copy(h, body); err != nil {
			return err
		}
		if _, dup := out[uri]; dup {
			t.Errorf("%s yielded twice", uri)
		}
		out[uri] = [md5.Size]byte(h.Sum(nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// seenChange is a change as read back from a generated package.
type seenChange struct {
	Change
	sum [md5.Size]byte
}

// readChangeDump walks the Change Dump at url (through its index when it
// is one), checks the documents' headers and returns the package entries.
func readChangeDump(t *testing.T, dir, url string, opts GenOptions, wantIndex bool) []xURL {
	t.Helper()
	start := opts.ChangeStart
	if start.IsZero() {
		start = DefaultAt()
	}
	end := start.Add(time.Duration(opts.ChangePackages) * opts.ChangeInterval)
	d := readDoc(t, dir, url)
	wantUntil := ""
	if opts.ClosedLast {
		wantUntil = fmtTime(end)
	}
	if d.MD.Capability != "changedump" || d.MD.From != fmtTime(start) || d.MD.Until != wantUntil || d.MD.At != "" {
		t.Errorf("change dump header %+v, want from %s until %q", d.MD, fmtTime(start), wantUntil)
	}
	if d.link("up") != Placeholder+"capabilitylist.xml" {
		t.Errorf("change dump up link %q", d.link("up"))
	}
	if got := d.XMLName.Local == "sitemapindex"; got != wantIndex {
		t.Fatalf("index: %v, want %v", got, wantIndex)
	}
	if !wantIndex {
		return d.URLs
	}
	var pkgs []xURL
	for _, sm := range d.Sitemaps {
		sub := readDoc(t, dir, sm.Loc)
		if sub.XMLName.Local != "urlset" || sub.MD.Capability != "changedump" || sub.link("index") != url || sub.link("up") != d.link("up") {
			t.Errorf("%s: header %+v", sm.Loc, sub)
		}
		if sub.MD.From != sm.MD.From || sub.MD.Until != sm.MD.Until || sub.MD.From == "" {
			t.Errorf("%s: interval [%s, %s] in the index, [%s, %s] in the document", sm.Loc, sm.MD.From, sm.MD.Until, sub.MD.From, sub.MD.Until)
		}
		if len(sub.URLs) == 0 || len(sub.URLs) > opts.IndexThreshold {
			t.Errorf("%s: %d packages, threshold %d", sm.Loc, len(sub.URLs), opts.IndexThreshold)
		}
		if first := sub.URLs[0].MD.From; first != sub.MD.From {
			t.Errorf("%s: from %s, first package from %s", sm.Loc, sub.MD.From, first)
		}
		if last := sub.URLs[len(sub.URLs)-1].MD.Until; last != sub.MD.Until {
			t.Errorf("%s: until %q, last package until %q", sm.Loc, sub.MD.Until, last)
		}
		pkgs = append(pkgs, sub.URLs...)
	}
	return pkgs
}

// checkChangePackage checks Change Dump package number k (1-based) listed
// as pu, and returns its changes as read from the package.
func checkChangePackage(t *testing.T, dir string, opts GenOptions, k int, pu xURL, paths map[string]bool) []seenChange {
	t.Helper()
	from := opts.ChangeStart.Add(time.Duration(k-1) * opts.ChangeInterval)
	until := from.Add(opts.ChangeInterval)
	name := fmt.Sprintf("change-%05d", k)
	if pu.Loc != Placeholder+"changes/"+name+".zip" || pu.link("contents") != Placeholder+"changes/"+name+".manifest.xml" {
		t.Errorf("package %d: loc %s contents %s", k, pu.Loc, pu.link("contents"))
	}
	wantUntil := fmtTime(until)
	if k == opts.ChangePackages && !opts.ClosedLast {
		wantUntil = ""
	}
	if pu.MD.Type != "application/zip" || pu.MD.From != fmtTime(from) || pu.MD.Until != wantUntil || pu.MD.At != "" {
		t.Errorf("package %d: rs:md %+v, want from %s until %q", k, pu.MD, fmtTime(from), wantUntil)
	}
	for _, l := range pu.Links {
		if l.Rel == "contents" && l.Type != "application/xml" {
			t.Errorf("package %d: contents type %q", k, l.Type)
		}
	}
	zipData, err := os.ReadFile(local(t, dir, pu.Loc))
	if err != nil {
		t.Fatal(err)
	}
	checkFixity(t, pu.Loc, pu.MD, zipData)
	manCopy, err := os.ReadFile(local(t, dir, pu.link("contents")))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := stdzip.NewReader(bytes.NewReader(zipData), int64(len(zipData)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) == 0 || zr.File[0].Name != "manifest.xml" || zr.File[0].Flags&0x8 != 0 {
		t.Fatalf("package %d: manifest.xml is not first or has a data descriptor", k)
	}
	if inZip := readZipFile(t, zr.File[0]); !bytes.Equal(inZip, manCopy) {
		t.Errorf("package %d: manifest copy differs from manifest.xml", k)
	}
	entries := map[string]*stdzip.File{}
	for _, f := range zr.File[1:] {
		entries[f.Name] = f
	}
	man := parseDoc(t, manCopy)
	if man.MD.Capability != "changedump-manifest" || man.MD.From != pu.MD.From || man.MD.Until != pu.MD.Until || man.link("up") != Placeholder+"capabilitylist.xml" {
		t.Errorf("package %d: manifest header %+v", k, man)
	}
	var out []seenChange
	var prev time.Time
	bodies := 0
	for j, u := range man.URLs {
		at := parseTime(t, u.Lastmod)
		if u.MD.Datetime != u.Lastmod {
			t.Errorf("package %d entry %d: datetime %q, lastmod %q", k, j, u.MD.Datetime, u.Lastmod)
		}
		switch {
		case j == 0 && !at.Equal(from):
			t.Errorf("package %d: first change at %s, want its from %s", k, at, from)
		case j > 0 && !at.After(prev):
			t.Errorf("package %d entry %d: %s not after %s", k, j, at, prev)
		case at.Before(from) || !at.Before(until):
			t.Errorf("package %d entry %d: %s outside [%s, %s)", k, j, at, from, until)
		}
		prev = at
		c := seenChange{Change: Change{Package: k, URI: u.Loc, Kind: u.MD.Change, Time: at}}
		if u.MD.Change == "deleted" {
			if u.MD.Path != "" || u.MD.Hash != "" || u.MD.Length != "" {
				t.Errorf("package %d: deletion of %s has %+v", k, u.Loc, u.MD)
			}
			out = append(out, c)
			continue
		}
		if u.MD.Change != "created" && u.MD.Change != "updated" {
			t.Errorf("package %d: change %q", k, u.MD.Change)
		}
		if paths[u.MD.Path] {
			t.Errorf("path %s used twice", u.MD.Path)
		}
		paths[u.MD.Path] = true
		f := entries[u.MD.Path[1:]]
		if f == nil || u.MD.Path[0] != '/' || u.MD.Type == "" {
			t.Errorf("package %d: entry %s path %q type %q", k, u.Loc, u.MD.Path, u.MD.Type)
			continue
		}
		bodies++
		body := readZipFile(t, f)
		checkFixity(t, u.Loc, u.MD, body)
		c.Length, c.sum = int64(len(body)), md5.Sum(body)
		out = append(out, c)
	}
	if bodies != len(entries) {
		t.Errorf("package %d: %d bodies in the manifest, %d in the ZIP", k, bodies, len(entries))
	}
	if len(man.URLs) > 0 && pu.Lastmod != man.URLs[len(man.URLs)-1].Lastmod {
		t.Errorf("package %d: lastmod %s, last change %s", k, pu.Lastmod, man.URLs[len(man.URLs)-1].Lastmod)
	}
	return out
}

// TestChangeDumpLayout checks the Change Dump, its packages and manifests
// against each other, against ChangesIn and against TruthAfter.
func TestChangeDumpLayout(t *testing.T) {
	tests := []struct {
		name      string
		threshold int
		closed    bool
		wantIndex bool
	}{
		{"open dump", 0, false, false},
		{"closed dump", 0, true, false},
		{"open index", 4, false, true},
		{"closed index", 2, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := changeOpts(dir)
			opts.IndexThreshold, opts.ClosedLast = tt.threshold, tt.closed
			res, err := Generate(t.Context(), opts)
			if err != nil {
				t.Fatal(err)
			}
			opts.ChangeStart, opts.ChangeInterval = DefaultAt(), DefaultChangeInterval
			if res.ChangePackages != 6 || res.Changes != 180 {
				t.Errorf("result %+v", res)
			}
			cl := readDoc(t, dir, Placeholder+"capabilitylist.xml")
			caps := map[string]string{}
			for _, u := range cl.URLs {
				caps[u.MD.Capability] = u.Loc
			}
			if caps["changedump"] != Placeholder+"changedump.xml" || caps["resourcedump"] == "" {
				t.Fatalf("capability list: %+v", caps)
			}
			pkgs := readChangeDump(t, dir, caps["changedump"], opts, tt.wantIndex)
			if len(pkgs) != res.ChangePackages {
				t.Fatalf("%d packages listed, want %d", len(pkgs), res.ChangePackages)
			}
			var seen []seenChange
			var bytesTotal int64
			paths := map[string]bool{}
			for i, pu := range pkgs {
				seen = append(seen, checkChangePackage(t, dir, opts, i+1, pu, paths)...)
				n, _ := strconv.ParseInt(pu.MD.Length, 10, 64)
				bytesTotal += n
			}
			if bytesTotal != res.ChangeBytes {
				t.Errorf("ChangeBytes %d, packages total %d", res.ChangeBytes, bytesTotal)
			}

			// ChangesIn lists exactly what the packages hold.
			want := allChanges(t, opts)
			if len(want) != len(seen) || len(seen) != res.Changes {
				t.Fatalf("ChangesIn gives %d changes, packages %d, result %d", len(want), len(seen), res.Changes)
			}
			for i := range want {
				if want[i] != seen[i].Change {
					t.Errorf("change %d: ChangesIn %+v, package %+v", i, want[i], seen[i].Change)
				}
			}

			// TruthAfter(k) is Truth with the packages' bodies of 1..k
			// applied in order.
			state := digests(t, func(fn func(string, io.Reader) error) error { return Truth(t.Context(), opts, fn) })
			next := 0
			for k := 0; k <= opts.ChangePackages; k++ {
				for ; next < len(seen) && seen[next].Package == k; next++ {
					c := seen[next]
					if c.Kind == "deleted" {
						delete(state, c.URI)
					} else {
						state[c.URI] = c.sum
					}
				}
				got := digests(t, func(fn func(string, io.Reader) error) error { return TruthAfter(t.Context(), opts, k, fn) })
				if len(got) != len(state) {
					t.Errorf("TruthAfter(%d): %d resources, want %d", k, len(got), len(state))
				}
				for uri, sum := range state {
					if g, ok := got[uri]; !ok || g != sum {
						t.Errorf("TruthAfter(%d): %s missing or different (present %v)", k, uri, ok)
					}
				}
			}
		})
	}
}

// TestTruthAfterFromChangesIn applies ChangesIn to Truth (latest change
// wins, deletions remove) and compares the resources and their lengths
// with TruthAfter.
func TestTruthAfterFromChangesIn(t *testing.T) {
	opts := changeOpts("")
	cs := allChanges(t, opts)
	lengths := func(k int) map[string]int64 {
		out := map[string]int64{}
		err := TruthAfter(t.Context(), opts, k, func(uri string, body io.Reader) error {
			n, err := io.Copy(io.Discard, body)
			out[uri] = n
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	state := lengths(0)
	base := map[string]int64{}
	if err := Truth(t.Context(), opts, func(uri string, body io.Reader) error {
		n, err := io.Copy(io.Discard, body)
		base[uri] = n
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(base) != fmt.Sprint(state) {
		t.Error("TruthAfter(0) differs from Truth")
	}
	for k := 1; k <= opts.ChangePackages+2; k++ {
		for _, c := range cs {
			if c.Package != k {
				continue
			}
			if c.Kind == "deleted" {
				delete(state, c.URI)
			} else {
				state[c.URI] = c.Length
			}
		}
		if got := lengths(k); fmt.Sprint(got) != fmt.Sprint(state) {
			t.Errorf("TruthAfter(%d) differs from Truth with ChangesIn of packages 1-%d applied", k, k)
		}
	}
	if err := TruthAfter(t.Context(), opts, -1, func(string, io.Reader) error { return nil }); err == nil {
		t.Error("TruthAfter(-1): no error")
	}
}

// TestChangeRealism checks that the change stream never changes a resource
// that does not exist or creates one that does, and that the cases a
// Destination must get right all occur.
func TestChangeRealism(t *testing.T) {
	tests := []struct {
		name string
		opts GenOptions
	}{
		{"seed 1", changeOpts("")},
		{"seed 2", func() GenOptions { o := changeOpts(""); o.Seed = 2; return o }()},
		{"more deletions", func() GenOptions { o := changeOpts(""); o.Seed, o.DeleteShare, o.CreateShare = 3, 0.2, 0.2; return o }()},
		{"defaults", GenOptions{Resources: 400, ChangePackages: 5, Seed: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exists := map[string]bool{}
			if err := Truth(t.Context(), tt.opts, func(uri string, _ io.Reader) error {
				exists[uri] = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			baseline := maps.Clone(exists)
			type event struct {
				pkg  int
				kind string
			}
			history := map[string][]event{}
			counts := map[string]int{}
			for _, c := range allChanges(t, tt.opts) {
				switch c.Kind {
				case "created":
					if exists[c.URI] {
						t.Errorf("package %d creates %s, which exists", c.Package, c.URI)
					}
					exists[c.URI] = true
				case "updated", "deleted":
					if !exists[c.URI] {
						t.Errorf("package %d: %s of %s, which does not exist", c.Package, c.Kind, c.URI)
					}
					exists[c.URI] = c.Kind == "updated"
				default:
					t.Fatalf("kind %q", c.Kind)
				}
				if c.Kind == "deleted" && c.Length != 0 {
					t.Errorf("deletion with length %d", c.Length)
				}
				history[c.URI] = append(history[c.URI], event{c.Package, c.Kind})
				counts[c.Kind]++
			}
			cases := map[string]bool{}
			for uri, h := range history {
				if baseline[uri] && h[0].kind == "updated" {
					cases["baseline resource updated"] = true
				}
				for a := range h {
					for b := a + 1; b < len(h); b++ {
						same := h[a].pkg == h[b].pkg
						switch {
						case same:
							cases["changed twice in one package"] = true
						case h[a].kind == "updated" && h[b].kind == "deleted":
							cases["updated, deleted in a later package"] = true
						case h[a].kind == "created" && h[b].kind == "updated":
							cases["created, updated in a later package"] = true
						case h[a].kind == "deleted" && h[b].kind == "created":
							cases["deleted, re-created in a later package"] = true
						}
					}
				}
			}
			for _, want := range []string{"baseline resource updated", "changed twice in one package",
				"updated, deleted in a later package", "created, updated in a later package", "deleted, re-created in a later package"} {
				if !cases[want] {
					t.Errorf("no case of %q", want)
				}
			}
			total := counts["created"] + counts["updated"] + counts["deleted"]
			cs, ds := tt.opts.CreateShare, tt.opts.DeleteShare
			if cs == 0 {
				cs, ds = DefaultCreateShare, DefaultDeleteShare
			}
			for kind, share := range map[string]float64{"created": cs, "deleted": ds} {
				if got := float64(counts[kind]) / float64(total); math.Abs(got-share) > 0.05 {
					t.Errorf("%s share %.3f, want about %.2f", kind, got, share)
				}
			}
		})
	}
}

// TestChangeTimes checks the documented boundaries: whole seconds,
// strictly increasing, the first change of each package at its from, the
// last before its until.
func TestChangeTimes(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		opts      GenOptions
		wantStart time.Time
		interval  time.Duration
	}{
		{"defaults", GenOptions{Resources: 100, ChangePackages: 3, Seed: 4}, DefaultAt(), time.Hour},
		{"every second taken", GenOptions{Resources: 50, ChangePackages: 4, ChangesPerPackage: 10, ChangeInterval: 10 * time.Second, Seed: 4},
			DefaultAt(), 10 * time.Second},
		{"start rounded up", GenOptions{Resources: 50, ChangePackages: 2, ChangesPerPackage: 5, At: at,
			ChangeStart: at.Add(1500 * time.Millisecond), ChangeInterval: time.Minute}, at.Add(2 * time.Second), time.Minute},
		{"start from At", GenOptions{Resources: 50, ChangePackages: 2, At: at, ChangeInterval: 24 * time.Hour}, at, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := allChanges(t, tt.opts)
			per := tt.opts.ChangesPerPackage
			if per == 0 {
				per = max(1, tt.opts.Resources/20)
			}
			if len(cs) != per*tt.opts.ChangePackages {
				t.Fatalf("%d changes, want %d", len(cs), per*tt.opts.ChangePackages)
			}
			for i, c := range cs {
				from := tt.wantStart.Add(time.Duration(c.Package-1) * tt.interval)
				until := from.Add(tt.interval)
				switch {
				case c.Time.Nanosecond() != 0:
					t.Errorf("change %d at %s: not a whole second", i, c.Time)
				case i%per == 0 && !c.Time.Equal(from):
					t.Errorf("package %d starts at %s, want %s", c.Package, c.Time, from)
				case i%per != 0 && !c.Time.After(cs[i-1].Time):
					t.Errorf("change %d at %s, not after %s", i, c.Time, cs[i-1].Time)
				case c.Time.Before(from) || !c.Time.Before(until):
					t.Errorf("change %d at %s outside [%s, %s)", i, c.Time, from, until)
				}
				if c.Package != i/per+1 {
					t.Errorf("change %d in package %d", i, c.Package)
				}
			}
		})
	}
}

func TestChangeOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opts GenOptions
	}{
		{"negative packages", GenOptions{Resources: 1, ChangePackages: -1}},
		{"negative per package", GenOptions{Resources: 1, ChangePackages: 1, ChangesPerPackage: -1}},
		{"fractional interval", GenOptions{Resources: 1, ChangePackages: 1, ChangeInterval: 1500 * time.Millisecond}},
		{"interval too short", GenOptions{Resources: 1, ChangePackages: 1, ChangesPerPackage: 61, ChangeInterval: time.Minute}},
		{"create share over 1", GenOptions{Resources: 1, ChangePackages: 1, CreateShare: 1.5}},
		{"shares over 1", GenOptions{Resources: 1, ChangePackages: 1, CreateShare: 0.6, DeleteShare: 0.5}},
		{"NaN share", GenOptions{Resources: 1, ChangePackages: 1, DeleteShare: math.NaN()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ChangesIn(t.Context(), tt.opts, func(Change) error { return nil }); err == nil {
				t.Error("ChangesIn: no error")
			}
			tt.opts.Dir = t.TempDir()
			if _, err := Generate(t.Context(), tt.opts); err == nil {
				t.Error("Generate: no error")
			}
		})
	}
}

// TestChangeEdgeCases generates Change Dumps from an empty baseline (the
// first change must be a creation) and with only updates.
func TestChangeEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		opts GenOptions
	}{
		{"empty baseline", GenOptions{Resources: 0, ChangePackages: 3, ChangesPerPackage: 4, MeanSize: 100}},
		{"updates only", GenOptions{Resources: 10, ChangePackages: 2, ChangesPerPackage: 8, MeanSize: 100, CreateShare: -1, DeleteShare: -1}},
		{"deletions only", GenOptions{Resources: 10, ChangePackages: 2, ChangesPerPackage: 8, MeanSize: 100, CreateShare: -1, DeleteShare: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Dir = t.TempDir()
			res, err := Generate(t.Context(), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			cs := allChanges(t, tt.opts)
			if res.Changes != len(cs) {
				t.Errorf("result %d changes, ChangesIn %d", res.Changes, len(cs))
			}
			exists := map[string]bool{}
			if err := Truth(t.Context(), tt.opts, func(uri string, _ io.Reader) error {
				exists[uri] = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if exists[c.URI] == (c.Kind == "created") {
					t.Errorf("%s of %s (exists: %v)", c.Kind, c.URI, exists[c.URI])
				}
				exists[c.URI] = c.Kind != "deleted"
				if tt.opts.CreateShare < 0 && tt.opts.DeleteShare < 0 && c.Kind != "updated" {
					t.Errorf("%s with shares off", c.Kind)
				}
			}
		})
	}
}

func TestChangeDumpDeterministic(t *testing.T) {
	ctx := t.Context()
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	opts := func(dir string) GenOptions {
		o := changeOpts(dir)
		o.IndexThreshold, o.WriteResources = 4, true
		return o
	}
	ra, err := Generate(ctx, opts(a))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Generate(ctx, opts(b))
	if err != nil {
		t.Fatal(err)
	}
	if ra != rb {
		t.Errorf("results differ: %+v vs %+v", ra, rb)
	}
	ha, hb := hashTree(t, a), hashTree(t, b)
	if len(ha) != len(hb) {
		t.Errorf("%d files vs %d", len(ha), len(hb))
	}
	for p, s := range ha {
		if hb[p] != s {
			t.Errorf("%s differs between two generations", p)
		}
	}
	for _, p := range []string{"changedump.xml", filepath.Join(".steps", "steps.json"), filepath.Join(".steps", "5", "changedump-0002.xml")} {
		if ha[p] == "" {
			t.Errorf("%s not written", p)
		}
	}
	other := opts(c)
	other.Seed++
	if _, err := Generate(ctx, other); err != nil {
		t.Fatal(err)
	}
	hc := hashTree(t, c)
	p := filepath.Join("changes", "change-00001.zip")
	if hc[p] == ha[p] {
		t.Errorf("%s is the same with another seed", p)
	}
}

// TestNoChangeDumpUnchanged: with ChangePackages 0 the other change
// options change nothing, and nothing of a Change Dump is written.
func TestNoChangeDumpUnchanged(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	oa := small(a)
	ob := small(b)
	ob.ChangesPerPackage, ob.ChangeInterval, ob.ClosedLast, ob.CreateShare = 3, time.Minute, true, 0.5
	ra, err := Generate(t.Context(), oa)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Generate(t.Context(), ob)
	if err != nil {
		t.Fatal(err)
	}
	if ra != rb || ra.ChangePackages != 0 || ra.Changes != 0 || ra.ChangeBytes != 0 {
		t.Errorf("results %+v, %+v", ra, rb)
	}
	ha, hb := hashTree(t, a), hashTree(t, b)
	if fmt.Sprint(ha) != fmt.Sprint(hb) {
		t.Error("change options changed a Source without Change Dump")
	}
	for p := range ha {
		if dir := filepath.Dir(p); dir == "changes" || dir == ".steps" || p == "changedump.xml" {
			t.Errorf("%s written without ChangePackages", p)
		}
	}
	if cl, _ := os.ReadFile(filepath.Join(a, "capabilitylist.xml")); bytes.Contains(cl, []byte("changedump")) {
		t.Error("capability list lists a change dump")
	}
	if got := digests(t, func(fn func(string, io.Reader) error) error { return TruthAfter(t.Context(), oa, 3, fn) }); len(got) != ra.Resources {
		t.Errorf("TruthAfter without changes: %d resources, want %d", len(got), ra.Resources)
	}
}

// TestNoChangeDumpIgnoresChangeOptions: without change packages, the
// change options' defaults are not checked (a million resources would
// otherwise ask for more changes per package than an hour has seconds).
func TestNoChangeDumpIgnoresChangeOptions(t *testing.T) {
	o := GenOptions{Resources: 1_000_000}
	if err := normalizeChanges(&o); err != nil {
		t.Fatal(err)
	}
}
