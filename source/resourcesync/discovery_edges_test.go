package resourcesync_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// countCaps counts the nodes of a tree of capability documents.
func countCaps(cs []resourcesync.Capability) int {
	n := 0
	for _, c := range cs {
		n += 1 + countCaps(c.Children)
	}
	return n
}

// TestSurveyDiamond: indexes that share children (a DAG, no loop)
// must not make Discover map the same documents again and again. Each
// level of resourcedump indexes lists every index of the next level: with
// 3 indexes a level and 9 levels (28 documents), a walk that mapped a
// document again for each index listing it would map 3^9 leaves: a URL met
// again on the way down is not followed again.
func TestSurveyDiamond(t *testing.T) {
	const width, levels = 3, 9
	s := newSite(t)
	name := func(l, i int) string { return fmt.Sprintf("/l%d/%d.xml", l, i) }
	var top []string
	for i := range width {
		top = append(top, "BASE"+name(0, i))
	}
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/top.xml capability="resourcedump"`))
	s.xml("/top.xml", rsdoc("sitemapindex", md(`capability="resourcedump"`), top...))
	for l := range levels {
		for i := range width {
			if l == levels-1 {
				s.xml(name(l, i), rsdoc("urlset", md(`capability="resourcedump" at="2024-01-01T00:00:00Z"`), "BASE/p.zip"))
				continue
			}
			var next []string
			for j := range width {
				next = append(next, "BASE"+name(l+1, j))
			}
			s.xml(name(l, i), rsdoc("sitemapindex", md(`capability="resourcedump"`), next...))
		}
	}
	docs := 2 + width*levels
	start := time.Now()
	src := mustDiscover(t, s.URL+"/cl.xml", resourcesync.Options{})
	took := time.Since(start)
	if len(src.Sets) != 1 {
		t.Fatalf("sets: %+v", src.Sets)
	}
	// Every document is listed by at most width indexes: a walk that maps
	// each document once has at most docs*width nodes.
	if n := countCaps(src.Sets[0].Capabilities); n > docs*width {
		t.Errorf("the tree of %d documents has %d nodes (took %v): documents listed by two indexes are mapped again each time", docs, n, took)
	}
	if n := s.totalHits(); n > docs {
		t.Errorf("%d requests for %d documents", n, docs)
	}
}

// TestSetNameNamesOneSet: --set syncs one resource set; a name two
// capability lists share (their file name) stops the run with an error
// naming the ambiguity, rather than syncing both.
func TestSetNameNamesOneSet(t *testing.T) {
	s := newSite(t)
	s.xml("/desc.xml", rsdoc("urlset", md(`capability="description"`),
		`BASE/x/capabilitylist.xml capability="capabilitylist"`,
		`BASE/y/capabilitylist.xml capability="capabilitylist"`))
	for _, d := range []string{"x", "y"} {
		s.xml("/"+d+"/capabilitylist.xml", rsdoc("urlset", ln("up", "BASE/desc.xml")+md(`capability="capabilitylist"`),
			"BASE/"+d+`/resourcelist.xml capability="resourcelist"`))
		s.xml("/"+d+"/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`), "BASE/"+d+"/r1"))
	}
	for name, want := range map[string]string{"x": s.URL + "/x/capabilitylist.xml", "capabilitylist": ""} {
		t.Run(name, func(t *testing.T) {
			var sets []string
			cps, err := testPlanner().Plan(t.Context(), source.Task{Source: s.URL + "/desc.xml", Mode: source.Baseline, Set: name}, sourcetest.Holdings{},
				func(context.Context, source.Unit) error { return nil })
			for _, cp := range cps {
				sets = append(sets, cp.ResourceSet)
			}
			switch {
			case want != "" && (err != nil || len(sets) != 1 || sets[0] != want):
				t.Errorf("--set %s: sets %q, err %v; want %s", name, sets, err, want)
			case want == "" && (err == nil || !strings.Contains(err.Error(), "more than one resource set")):
				t.Errorf("--set %s selected resource sets %q (err %v); want an error naming the ambiguity", name, sets, err)
			}
		})
	}
}

// TestResourceListIndexAt: a baseline from a Resource List Index reaches
// the index's at (the snapshot's start, spec §10.2), also when its
// Resource Lists do not repeat it: without a checkpoint the executor
// records none, `incremental` refuses to run and `sync` repeats the
// baseline forever.
func TestResourceListIndexAt(t *testing.T) {
	s := newSite(t)
	cl := s.URL + "/cl.xml"
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`), `BASE/rl-index.xml capability="resourcelist"`))
	s.xml("/rl-index.xml", rsdoc("sitemapindex", md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`),
		`BASE/rl1.xml at="2024-01-01T00:00:00Z"`, `BASE/rl2.xml at="2024-01-01T00:00:00Z"`))
	s.xml("/rl1.xml", rsdoc("urlset", md(`capability="resourcelist"`), "BASE/r1"))
	s.xml("/rl2.xml", rsdoc("urlset", md(`capability="resourcelist"`), "BASE/r2"))
	cps, err := testPlanner().Plan(t.Context(), source.Task{Source: cl, Mode: source.Baseline}, sourcetest.Holdings{},
		func(context.Context, source.Unit) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if len(cps) != 1 || !cps[0].Next.Equal(want) {
		t.Errorf("checkpoints %+v, want %s's Next at the index's at %s", cps, cl, want)
	}
}
