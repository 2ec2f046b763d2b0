package resourcesync_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"

	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// plannerSite serves a source with two resource sets:
//
//	s1: a Resource Dump index of two dumps (three packages, one with an
//	    at of its own), and a Change Dump index of three dumps (one
//	    closed before 2024, one closed in January, one open) whose
//	    packages link their manifest copies: r10 created on 3 January and
//	    updated on the 20th, r11 created on the 5th and deleted on the
//	    17th, r12 created on the 16th, r13 on 2 February
//	s2: a Resource List (two resources and an entry that is not an
//	    http(s) URL) and an open Change List
func plannerSite(t *testing.T) *site {
	s := newSite(t)
	desc, cl1, cl2 := "BASE/desc.xml", "BASE/s1/capabilitylist.xml", "BASE/s2/capabilitylist.xml"
	s.xml("/desc.xml", rsdoc("urlset", md(`capability="description"`),
		cl1+` capability="capabilitylist"`, cl2+` capability="capabilitylist"`))
	s.xml("/s1/capabilitylist.xml", rsdoc("urlset", ln("up", desc)+md(`capability="capabilitylist"`),
		`BASE/s1/rd-index.xml capability="resourcedump"`,
		`BASE/s1/cd-index.xml capability="changedump"`))
	s.xml("/s1/rd-index.xml", rsdoc("sitemapindex", md(`capability="resourcedump" at="2024-01-02T00:00:00Z"`),
		`BASE/s1/rd1.xml at="2024-01-02T00:00:00Z"`, `BASE/s1/rd2.xml at="2024-01-03T00:00:00Z"`))
	s.xml("/s1/rd1.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-01-02T00:00:00Z"`),
		`BASE/s1/p1.zip length="10"`, `BASE/s1/p2.zip length="20" at="2024-01-01T00:00:00Z"`))
	s.xml("/s1/rd2.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-01-03T00:00:00Z"`),
		`BASE/s1/p3.zip length="30"`))
	s.xml("/s1/cd-index.xml", rsdoc("sitemapindex", md(`capability="changedump" from="2023-01-01T00:00:00Z"`),
		`BASE/s1/cd0.xml from="2023-01-01T00:00:00Z" until="2023-12-31T00:00:00Z"`,
		`BASE/s1/cd1.xml from="2024-01-01T00:00:00Z" until="2024-02-01T00:00:00Z"`,
		`BASE/s1/cd2.xml from="2024-02-01T00:00:00Z"`))
	s.xml("/s1/cd0.xml", rsdoc("urlset", md(`capability="changedump" from="2023-01-01T00:00:00Z" until="2023-12-31T00:00:00Z"`),
		`BASE/s1/c0.zip from="2023-01-01T00:00:00Z" until="2023-12-31T00:00:00Z"`))
	s.xml("/s1/cd1.xml", rsdoc("urlset", md(`capability="changedump" from="2024-01-01T00:00:00Z" until="2024-02-01T00:00:00Z"`),
		`BASE/s1/c1a.zip from="2024-01-01T00:00:00Z" until="2024-01-10T00:00:00Z"`+contents("BASE/s1/c1a.xml"),
		`BASE/s1/c1b.zip from="2024-01-10T00:00:00Z" until="2024-02-01T00:00:00Z"`+contents("BASE/s1/c1b.xml")))
	s.xml("/s1/cd2.xml", rsdoc("urlset", md(`capability="changedump" from="2024-02-01T00:00:00Z"`),
		`BASE/s1/c2.zip from="2024-02-01T00:00:00Z"`+contents("BASE/s1/c2.xml")))
	cdm := md(`capability="changedump-manifest"`)
	s.xml("/s1/c1a.xml", rsdoc("urlset", cdm,
		`BASE/r10 change="created" datetime="2024-01-03T00:00:00Z" path="/r10"`,
		`BASE/r11 change="created" datetime="2024-01-05T00:00:00Z" path="/r11"`))
	s.xml("/s1/c1b.xml", rsdoc("urlset", cdm,
		`BASE/r12 change="created" datetime="2024-01-16T00:00:00Z" path="/r12"`,
		`BASE/r11 change="deleted" datetime="2024-01-17T00:00:00Z"`,
		`BASE/r10 change="updated" datetime="2024-01-20T00:00:00Z" path="/r10"`))
	s.xml("/s1/c2.xml", rsdoc("urlset", cdm,
		`BASE/r13 change="created" datetime="2024-02-02T00:00:00Z" path="/r13"`))
	s.xml("/s2/capabilitylist.xml", rsdoc("urlset", ln("up", desc)+md(`capability="capabilitylist"`),
		`BASE/s2/resourcelist.xml capability="resourcelist"`,
		`BASE/s2/changelist.xml capability="changelist"`))
	s.xml("/s2/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2024-01-05T00:00:00Z"`),
		`BASE/r1 length="3"`, `BASE/r2`, `ftp://example.org/r3`))
	s.xml("/s2/changelist.xml", rsdoc("urlset", md(`capability="changelist" from="2024-01-01T00:00:00Z"`),
		`BASE/r1 change="updated" datetime="2024-01-06T00:00:00Z"`))
	// s3, not in the Source Description: an empty Resource Dump.
	s.xml("/s3/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/s3/resourcedump.xml capability="resourcedump"`))
	s.xml("/s3/resourcedump.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-03-01T00:00:00Z"`)))
	// s4, not in the Source Description: a Resource Dump index that lists
	// rd1 twice, itself, and an index that lists rd1 again and rd2.
	s.xml("/s4/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/s4/rd-index.xml capability="resourcedump"`))
	s.xml("/s4/rd-index.xml", rsdoc("sitemapindex", md(`capability="resourcedump"`),
		`BASE/s4/rd1.xml`, `BASE/s4/rd1.xml`, `BASE/s4/rd-index.xml`, `BASE/s4/rd-sub.xml`))
	s.xml("/s4/rd-sub.xml", rsdoc("sitemapindex", md(`capability="resourcedump"`), `BASE/s4/rd1.xml`, `BASE/s4/rd2.xml`))
	s.xml("/s4/rd1.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-04-01T00:00:00Z"`), `BASE/s4/q1.zip`))
	s.xml("/s4/rd2.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-04-02T00:00:00Z"`), `BASE/s4/q2.zip`))
	// s5, a Source Description of its own: a Resource Dump of two
	// packages (s5a) and a Resource List of 2,500 resources (s5b), all
	// well formed: a baseline that divides into two packages and three
	// slices of the list.
	s.xml("/s5/desc.xml", rsdoc("urlset", md(`capability="description"`),
		`BASE/s5a/capabilitylist.xml capability="capabilitylist"`, `BASE/s5b/capabilitylist.xml capability="capabilitylist"`))
	s.xml("/s5a/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/s5a/resourcedump.xml capability="resourcedump"`))
	s.xml("/s5a/resourcedump.xml", rsdoc("urlset", md(`capability="resourcedump" at="2024-05-01T00:00:00Z"`), `BASE/s5a/d1.zip`, `BASE/s5a/d2.zip`))
	s.xml("/s5b/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/s5b/resourcelist.xml capability="resourcelist"`))
	s.xml("/s5b/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2024-05-02T00:00:00Z"`), longList()...))
	return s
}

// longList are the entries of s5's Resource List.
func longList() []string {
	out := make([]string, 2500)
	for i := range out {
		out[i] = fmt.Sprintf("BASE/s5b/r%d", i)
	}
	return out
}

// testPlanner is a planner reading documents without retries.
func testPlanner() *resourcesync.Planner {
	c := fetch.New(fetch.Options{Retries: -1, BackoffInitial: time.Millisecond, Timeout: 5 * time.Second})
	return &resourcesync.Planner{
		Open:   func(ctx context.Context, u string) (io.ReadCloser, error) { return c.Open(ctx, u) },
		Client: c,
		Log:    slog.New(slog.DiscardHandler),
	}
}

// TestPlannerConformance runs the planner conformance suite on the
// ResourceSync planner: baselines from dumps and lists, one resource set,
// incremental tasks from checkpoints and from an explicit range.
func TestPlannerConformance(t *testing.T) {
	s := plannerSite(t)
	base := s.URL
	p := testPlanner()
	day := func(m time.Month, d int) time.Time { return time.Date(2024, m, d, 0, 0, 0, 0, time.UTC) }
	s1, s2 := base+"/s1/capabilitylist.xml", base+"/s2/capabilitylist.xml"
	held := sourcetest.Holdings{
		s1: {ResourceSet: s1, Next: day(1, 15), Baseline: day(1, 1)},
		s2: {ResourceSet: s2, Next: day(1, 10), Baseline: day(1, 5)},
	}
	task := func(mode source.Mode, set string, from, until time.Time) source.Task {
		return source.Task{Source: base + "/desc.xml", Mode: mode, Set: set, From: from, Until: until}
	}
	var long []string
	for _, e := range longList() {
		long = append(long, strings.Replace(e, "BASE", base, 1))
	}
	s5a, s5b := base+"/s5a/capabilitylist.xml", base+"/s5b/capabilitylist.xml"
	sourcetest.Run(t, []sourcetest.Case{
		{
			Name: "baseline of a dump and a long list", Planner: p, Task: source.Task{Source: base + "/s5/desc.xml", Mode: source.Baseline},
			Packages: []string{base + "/s5a/d1.zip", base + "/s5a/d2.zip"}, Records: long, Parts: 5,
			Sets: []string{s5a, s5b}, Checkpoints: map[string]time.Time{s5a: day(5, 1), s5b: day(5, 2)},
		},
		{
			Name: "baseline", Planner: p, Task: task(source.Baseline, "", time.Time{}, time.Time{}),
			Packages:    []string{base + "/s1/p1.zip", base + "/s1/p2.zip", base + "/s1/p3.zip"},
			Records:     []string{base + "/r1", base + "/r2"},
			Failures:    []string{"ftp://example.org/r3"},
			Sets:        []string{s1, s2},
			Checkpoints: map[string]time.Time{s1: day(1, 1), s2: day(1, 5)},
		},
		{
			Name: "baseline of one set", Planner: p, Task: task(source.Baseline, "s2", time.Time{}, time.Time{}),
			Records: []string{base + "/r1", base + "/r2"}, Failures: []string{"ftp://example.org/r3"},
			Sets: []string{s2}, Checkpoints: map[string]time.Time{s2: day(1, 5)},
		},
		{
			Name: "incremental from the checkpoints", Planner: p, Held: held, Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Packages:    []string{base + "/s1/c1b.zip", base + "/s1/c2.zip"},
			Records:     []string{base + "/r11"}, // deleted
			Parts:       3,
			Sets:        []string{s1, s2},
			Checkpoints: map[string]time.Time{s1: day(2, 2), s2: day(1, 10)},
		},
		{
			Name: "incremental over a range", Planner: p, Held: held, Task: task(source.Incremental, "", day(1, 2), day(1, 9)),
			Packages:    []string{base + "/s1/c1a.zip"},
			Records:     []string{base + "/r1"}, // from the Change List
			Parts:       2,
			Sets:        []string{s1, s2},
			Checkpoints: map[string]time.Time{s1: day(1, 9), s2: day(1, 9)},
		},
		{
			// Nothing to fetch, but a snapshot all the same: incremental
			// runs go on from its time.
			Name: "baseline of an empty Resource Dump", Planner: p, Task: source.Task{Source: base + "/s3/capabilitylist.xml", Mode: source.Baseline},
			Sets: []string{base + "/s3/capabilitylist.xml"}, Checkpoints: map[string]time.Time{base + "/s3/capabilitylist.xml": day(3, 1)},
		},
		{
			// Real producers list a document twice, or from two indexes:
			// it is read once. A link loop is the entry's failure; the
			// rest of the index is planned.
			Name: "baseline over documents listed twice and a link loop", Planner: p,
			Task:     source.Task{Source: base + "/s4/capabilitylist.xml", Mode: source.Baseline},
			Packages: []string{base + "/s4/q1.zip", base + "/s4/q2.zip"}, Failures: []string{base + "/s4/rd-index.xml"},
			Sets: []string{base + "/s4/capabilitylist.xml"}, Checkpoints: map[string]time.Time{base + "/s4/capabilitylist.xml": day(4, 1)},
		},
		{
			Name: "incremental without a checkpoint", Planner: p, Task: task(source.Incremental, "", time.Time{}, time.Time{}),
			Err: source.ErrNoCheckpoint,
		},
	})
}

// contents ends an entry's rs:md attributes with a link to the package's
// manifest copy.
func contents(href string) string {
	return `/><rs:ln rel="contents" href="` + href + `"`
}

// TestPartPlanned: a part is planned from the plan Parts gave it, the
// source not read again — what each part emits is the whole plan's, a
// package with its index and its winners — and a part without a plan (one
// divided by an older version) fails for good, so that its task's
// checkpoints are held and the next harvest divides the task anew.
func TestPartPlanned(t *testing.T) {
	s := plannerSite(t)
	day := func(m time.Month, d int) time.Time { return time.Date(2024, m, d, 0, 0, 0, 0, time.UTC) }
	s1, s2 := s.URL+"/s1/capabilitylist.xml", s.URL+"/s2/capabilitylist.xml"
	held := sourcetest.Holdings{
		s1: {ResourceSet: s1, Next: day(1, 15), Baseline: day(1, 1)},
		s2: {ResourceSet: s2, Next: day(1, 10), Baseline: day(1, 5)},
	}
	for _, task := range []source.Task{
		{Source: s.URL + "/s5/desc.xml", Mode: source.Baseline},
		{Source: s.URL + "/desc.xml", Mode: source.Incremental},
	} {
		t.Run(string(task.Mode), func(t *testing.T) {
			ctx := t.Context()
			p := testPlanner()
			var whole []source.Unit
			if _, err := p.Plan(ctx, task, held, func(_ context.Context, u source.Unit) error {
				whole = append(whole, u)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var names []string
			plans := map[string][]byte{}
			if _, err := p.Parts(ctx, task, held, func(_ context.Context, name string, plan []byte) error {
				names, plans[name] = append(names, name), plan
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			before := maps.Clone(s.hits)
			s.mu.Unlock()
			var got []source.Unit
			for _, name := range names {
				pt := task
				pt.Part, pt.PartPlan = name, plans[name]
				if _, err := p.Plan(ctx, pt, held, func(_ context.Context, u source.Unit) error {
					if u.Package != nil && u.Package.Index == nil {
						t.Errorf("part %s: package %s without its index", name, u.Package.URL)
					}
					got = append(got, u)
					return nil
				}); err != nil {
					t.Fatalf("part %s: %v", name, err)
				}
			}
			s.mu.Lock()
			after := maps.Clone(s.hits)
			s.mu.Unlock()
			if !maps.Equal(before, after) {
				t.Errorf("planning the parts read the source: hits %v, then %v", before, after)
			}
			key := func(u source.Unit) string {
				switch {
				case u.Package != nil:
					return fmt.Sprintf("package %s wins %d", u.Package.URL, len(u.Package.Wins))
				case u.Record != nil:
					return fmt.Sprintf("record %s %s %s", u.Record.URI, u.Record.Change, u.Record.Listed)
				case u.Document != nil:
					return "document " + u.Document.URL
				}
				return ""
			}
			var w, g []string
			for _, u := range whole {
				if k := key(u); k != "" {
					w = append(w, k)
				}
			}
			for _, u := range got {
				g = append(g, key(u))
			}
			slices.Sort(w)
			slices.Sort(g)
			if !slices.Equal(w, g) {
				t.Errorf("the parts planned\n%q\nthe whole task\n%q", g, w)
			}
			pt := task
			pt.Part = names[0]
			_, err := p.Plan(ctx, pt, held, func(context.Context, source.Unit) error { return nil })
			if !errclass.IsPermanent(err) {
				t.Errorf("a part without its plan: %v, want a permanent failure", err)
			}
			pt.PartPlan = []byte("not a plan")
			if _, err := p.Plan(ctx, pt, held, func(context.Context, source.Unit) error { return nil }); !errclass.IsFatal(err) {
				t.Errorf("a part with a damaged plan: %v, want a fatal error", err)
			}
		})
	}
}
