package resourcesync_test

import (
	"context"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/resourcesync"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// planBounded plans task with a planner that does not retry, bounded in
// time, and returns every unit emitted and the plan's error.
func planBounded(t *testing.T, task source.Task, held source.Holdings) ([]source.Unit, []source.Checkpoint, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var us []source.Unit
	cps, err := testPlanner().Plan(ctx, task, held, func(_ context.Context, u source.Unit) error {
		us = append(us, u)
		return nil
	})
	if ctx.Err() != nil {
		t.Fatalf("Plan(%s) did not finish in time", task.Source)
	}
	return us, cps, err
}

// TestSetListedTwice: a Source Description that lists one Capability
// List twice has one resource set (as Discover says): --set naming it
// syncs it, once.
func TestSetListedTwice(t *testing.T) {
	s := newSite(t)
	cl := "BASE/books/capabilitylist.xml"
	s.xml("/desc.xml", rsdoc("urlset", md(`capability="description"`),
		cl+` capability="capabilitylist"`,
		cl+` capability="capabilitylist"`))
	s.xml("/books/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/books/resourcelist.xml capability="resourcelist"`))
	s.xml("/books/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`),
		`BASE/r1`))

	// Discover sees one set.
	src := mustDiscover(t, s.URL+"/desc.xml", resourcesync.Options{})
	if len(src.Sets) != 1 {
		t.Fatalf("Discover found %d sets, want 1", len(src.Sets))
	}
	us, _, err := planBounded(t, source.Task{Source: s.URL + "/desc.xml", Mode: source.Baseline, Set: "books"}, nil)
	if err != nil {
		t.Fatalf("--set books over a Source Description listing its one capability list twice: %v", err)
	}
	var recs []string
	for _, u := range us {
		if u.Record != nil {
			recs = append(recs, u.Record.URI)
		}
	}
	if len(recs) != 1 {
		t.Errorf("records %v, want the set's one resource", recs)
	}
}

// TestMalformedChangeOutsideRange: a Change List entry that cannot be read
// (its length is not a number) but whose datetime can, dated before the
// range, is passed by as any change outside the range is: not reported,
// and no retry of it (a deletion dated now would undo the resource's
// creation in the range).
func TestMalformedChangeOutsideRange(t *testing.T) {
	s := newSite(t)
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/changelist.xml capability="changelist"`))
	s.xml("/changelist.xml", rsdoc("urlset", md(`capability="changelist" from="2020-01-01T00:00:00Z"`),
		`BASE/r1 change="deleted" datetime="2020-06-01T00:00:00Z" length="x"`,
		`BASE/r1 change="created" datetime="2024-01-06T00:00:00Z"`,
		`BASE/r2 change="created" datetime="2024-01-07T00:00:00Z"`))
	set := s.URL + "/cl.xml"
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	held := sourcetest.Holdings{set: {ResourceSet: set, Next: from, Baseline: from}}
	us, _, err := planBounded(t, source.Task{Source: set, Mode: source.Incremental}, held)
	if err != nil {
		t.Fatal(err)
	}
	var created time.Time
	for _, u := range us {
		if u.Record != nil && u.Record.URI == s.URL+"/r1" && u.Record.Change == source.Created {
			created = u.Record.ChangeTime
		}
	}
	if created.IsZero() {
		t.Fatalf("r1's creation in range was not planned")
	}
	for _, u := range us {
		f := u.Failure
		if f == nil {
			continue
		}
		msg := "failure " + f.URI + ": " + f.Err.Error()
		if f.Retry != nil {
			msg += " (retry: " + string(f.Retry.Change) + " at " + f.Retry.ChangeTime.Format(time.RFC3339) + ")"
			if f.Retry.Change == source.Deleted && f.Retry.ChangeTime.After(created) {
				msg += ", which outdates r1's creation in range and will delete it when retried"
			}
		}
		t.Errorf("a malformed change dated 2020, outside the range from %s, was reported: %s", from.Format(time.RFC3339), msg)
	}
}

// TestInvertedChangeListRead: a Change List whose until is before its
// from (bounds that say nothing) is read, its entries judged by their own
// times: its change in the range is planned, not dropped unsaid.
func TestInvertedChangeListRead(t *testing.T) {
	s := newSite(t)
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/changelist.xml capability="changelist"`))
	s.xml("/changelist.xml", rsdoc("urlset", md(`capability="changelist" from="2024-02-01T00:00:00Z" until="2024-01-01T00:00:00Z"`),
		`BASE/r1 change="updated" datetime="2024-01-06T00:00:00Z"`))
	set := s.URL + "/cl.xml"
	from := time.Date(2024, 1, 5, 0, 0, 0, 0, time.UTC)
	held := sourcetest.Holdings{set: {ResourceSet: set, Next: from, Baseline: from}}
	us, cps, err := planBounded(t, source.Task{Source: set, Mode: source.Incremental}, held)
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, u := range us {
		if (u.Record != nil && u.Record.URI == s.URL+"/r1") || u.Failure != nil {
			named = true
		}
	}
	if !named {
		next := time.Time{}
		for _, cp := range cps {
			next = cp.Next
		}
		t.Errorf("r1's change of 2024-01-06, in the range from %s, was dropped without a failure (checkpoint %s)", from.Format(time.RFC3339), next.Format(time.RFC3339))
	}
}

// TestSetOnCapabilityList: a --set that does not name the Capability List
// given as the source stops the run, as over a Source Description, instead
// of syncing the set it does not name.
func TestSetOnCapabilityList(t *testing.T) {
	s := newSite(t)
	s.xml("/books/capabilitylist.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/books/resourcelist.xml capability="resourcelist"`))
	s.xml("/books/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2024-01-01T00:00:00Z"`),
		`BASE/r1`))
	us, _, err := planBounded(t, source.Task{Source: s.URL + "/books/capabilitylist.xml", Mode: source.Baseline, Set: "maps"}, nil)
	if err == nil {
		n := 0
		for _, u := range us {
			if u.Record != nil {
				n++
			}
		}
		t.Errorf("--set maps over the capability list of set books: no error, %d records planned", n)
	}
}

// TestFutureAtCheckpoint: a Resource List dated in the future (a
// producer's clock) does not make the baseline's checkpoint the future,
// which would have the next incremental runs read an empty range until
// then: the checkpoint is now.
func TestFutureAtCheckpoint(t *testing.T) {
	s := newSite(t)
	s.xml("/cl.xml", rsdoc("urlset", md(`capability="capabilitylist"`),
		`BASE/resourcelist.xml capability="resourcelist"`))
	s.xml("/resourcelist.xml", rsdoc("urlset", md(`capability="resourcelist" at="2199-01-01T00:00:00Z"`),
		`BASE/r1`))
	before := time.Now()
	_, cps, err := planBounded(t, source.Task{Source: s.URL + "/cl.xml", Mode: source.Baseline}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.Next.After(before.Add(time.Hour)) {
			t.Errorf("baseline checkpoint of %s is %s, in the future", cp.ResourceSet, cp.Next.Format(time.RFC3339))
		}
	}
}
