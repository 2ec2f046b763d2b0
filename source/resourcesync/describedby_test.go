package resourcesync_test

import (
	"context"
	"testing"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// TestPlannerDescribedBy: every checkpoint names the source's own
// description the walk started from — the Source Description, else the
// Capability List — and none when the walk started at a dump.
func TestPlannerDescribedBy(t *testing.T) {
	s := plannerSite(t)
	base := s.URL
	p := testPlanner()
	for _, tc := range []struct{ start, want string }{
		{base + "/desc.xml", base + "/desc.xml"},
		{base + "/s3/capabilitylist.xml", base + "/s3/capabilitylist.xml"},
		{base + "/s3/resourcedump.xml", ""},
	} {
		cps, err := p.Plan(t.Context(), source.Task{Source: tc.start, Mode: source.Baseline}, sourcetest.Holdings{},
			func(context.Context, source.Unit) error { return nil })
		if err != nil {
			t.Fatalf("%s: %v", tc.start, err)
		}
		if len(cps) == 0 {
			t.Fatalf("%s: no checkpoint", tc.start)
		}
		for _, cp := range cps {
			if cp.DescribedBy != tc.want {
				t.Errorf("from %s: set %s described by %q, want %q", tc.start, cp.ResourceSet, cp.DescribedBy, tc.want)
			}
		}
	}
}

// TestPlannerFromHomePage: a source named by a page that is not a bare
// site — an HTML home page with a DOCTYPE, at a path — is found through
// the page's rel="resourcesync" link, as discovery finds it.
func TestPlannerFromHomePage(t *testing.T) {
	s := plannerSite(t)
	s.add("/repo/", "text/html; charset=utf-8", `<!DOCTYPE html>
<html><head><title>A repository</title><link rel="resourcesync" href="/desc.xml"></head><body></body></html>`)
	cps, err := testPlanner().Plan(t.Context(), source.Task{Source: s.URL + "/repo/", Mode: source.Baseline}, sourcetest.Holdings{},
		func(context.Context, source.Unit) error { return nil })
	if err != nil || len(cps) == 0 || cps[0].DescribedBy != s.URL+"/desc.xml" {
		t.Fatalf("from a home page: %+v, %v", cps, err)
	}
}
