// Package sourcetest is the conformance suite every protocol's planner
// must pass (a source.Planner): its units are well formed, disjoint and
// complete, its checkpoints are never ahead of what the units cover, it
// stops when emit refuses a unit or the context ends, and planning the
// same task twice plans the same. A protocol's tests call Run with cases
// built over their own fixtures.
package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/source"
)

// Case is one task a planner is tested on, and what its plan must hold.
type Case struct {
	Name    string
	Planner source.Planner
	Task    source.Task
	// Held is what the destination holds (nil: nothing).
	Held source.Holdings
	// Packages and Records are the package URLs and record URIs the plan
	// must emit, each exactly once, in any order; no other may be emitted.
	Packages, Records []string
	// Failures are URIs the plan must emit as failures; Skips those it
	// must emit as left out.
	Failures, Skips []string
	// Sets are the resource sets the plan must return a checkpoint for.
	Sets []string
	// Checkpoints, when set, are the Next of each set the plan must return.
	Checkpoints map[string]time.Time
	// Err, when set, is an error the plan must end with (errors.Is).
	Err error
	// Parts, when not 0, is how many parts a Parter must divide the task
	// into.
	Parts int
	// Unordered says the planner emits from several lists at once (an
	// OAI-PMH harvest in parallel date windows): planning again must plan
	// the same units, in any order.
	Unordered bool
}

// Holdings is a source.Holdings of checkpoints by resource set.
type Holdings map[string]source.Checkpoint

// Checkpoint returns the checkpoint of set.
func (h Holdings) Checkpoint(_ context.Context, set string) (source.Checkpoint, bool, error) {
	cp, ok := h[set]
	return cp, ok, nil
}

// Progress returns no marks: these holdings are a finished task's.
func (h Holdings) Progress(context.Context, string) (map[string]string, error) { return nil, nil }

// Retries returns none.
func (h Holdings) Retries(context.Context, string) ([]source.Record, error) { return nil, nil }

var _ source.Holdings = Holdings(nil)

// Resumed is a source.Holdings with the marks an unfinished task left:
// Marks by resource set, then by key.
type Resumed struct {
	Holdings
	Marks map[string]map[string]string
}

// Progress returns the marks of set.
func (h Resumed) Progress(_ context.Context, set string) (map[string]string, error) {
	return h.Marks[set], nil
}

var _ source.Holdings = Resumed{}

// plan is what one Plan call produced.
type plan struct {
	units []source.Unit
	cps   []source.Checkpoint
	err   error
}

// held is the case's holdings (empty when it gives none).
func (c *Case) held() source.Holdings {
	if c.Held == nil {
		return Holdings{}
	}
	return c.Held
}

func (c *Case) plan(ctx context.Context, emit func(context.Context, source.Unit) error) plan {
	var p plan
	p.cps, p.err = c.Planner.Plan(ctx, c.Task, c.held(), func(ctx context.Context, u source.Unit) error {
		p.units = append(p.units, u)
		if emit != nil {
			return emit(ctx, u)
		}
		return nil
	})
	return p
}

// Run runs the suite on every case, each as a subtest.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := c.plan(ctx, nil)
			if c.Err != nil {
				if !errors.Is(p.err, c.Err) {
					t.Fatalf("Plan: err = %v, want %v", p.err, c.Err)
				}
				return
			}
			if p.err != nil {
				t.Fatalf("Plan: %v", p.err)
			}
			t.Run("units", func(t *testing.T) { checkUnits(t, c, p) })
			t.Run("checkpoints", func(t *testing.T) { checkCheckpoints(t, c, p) })
			t.Run("stops when emit refuses", func(t *testing.T) { checkRefusal(t, c, len(p.units)) })
			t.Run("stops when cancelled", func(t *testing.T) { checkCancel(t, c) })
			t.Run("same plan twice", func(t *testing.T) { checkRepeat(t, c, p) })
			if _, ok := c.Planner.(source.Parter); ok {
				t.Run("parts", func(t *testing.T) { checkParts(ctx, t, c, p) })
			}
		})
	}
}

// checkUnits: each unit is one thing; packages and records are disjoint
// and complete; the failures expected are emitted; a plan that marks its
// progress emits no packages (marks do not wait for them).
func checkUnits(t *testing.T, c Case, p plan) {
	var pkgs, recs, fails, skips []string
	marks := 0
	for i, u := range p.units {
		n := 0
		for _, set := range []bool{u.Package != nil, u.Record != nil, u.Failure != nil, u.Document != nil, u.Mark != nil, u.Skip != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Errorf("unit %d has %d of Package, Record, Failure, Document, Mark, Skip set, want exactly 1", i, n)
			continue
		}
		if u.Mark != nil {
			marks++
			if u.Mark.Key == "" {
				t.Errorf("unit %d: a mark without a key", i)
			}
		}
		switch {
		case u.Package != nil:
			pkgs = append(pkgs, u.Package.URL)
		case u.Record != nil:
			recs = append(recs, u.Record.URI)
			if u.Record.Length < -1 {
				t.Errorf("record %s: length %d", u.Record.URI, u.Record.Length)
			}
		case u.Failure != nil:
			fails = append(fails, u.Failure.URI)
			if u.Failure.Err == nil {
				t.Errorf("failure of %s without an error", u.Failure.URI)
			}
		case u.Skip != nil:
			skips = append(skips, u.Skip.URI)
			if u.Skip.Reason == "" {
				t.Errorf("skip of %s without a reason", u.Skip.URI)
			}
		}
	}
	if marks > 0 && len(pkgs) > 0 {
		t.Errorf("%d marks and %d packages: a plan that marks its progress emits no packages", marks, len(pkgs))
	}
	sameSet(t, "packages", pkgs, c.Packages)
	sameSet(t, "records", recs, c.Records)
	for _, f := range c.Failures {
		if !slices.Contains(fails, f) {
			t.Errorf("no failure emitted for %s (failures: %v)", f, fails)
		}
	}
	for _, s := range c.Skips {
		if !slices.Contains(skips, s) {
			t.Errorf("no skip emitted for %s (skips: %v)", s, skips)
		}
	}
}

// sameSet checks that got holds each of want exactly once, and nothing
// else.
func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
		if seen[g] == 2 {
			t.Errorf("%s: %s emitted more than once (units must be disjoint)", what, g)
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("%s: %s not emitted (the plan must be complete)", what, w)
		}
	}
	for g := range seen {
		if !slices.Contains(want, g) {
			t.Errorf("%s: %s emitted, not expected", what, g)
		}
	}
}

// checkCheckpoints: one per resource set met, never ahead of what the
// units cover: a baseline's no later than the snapshot of any package of
// its set; an incremental task's within its range, at its Until only when
// the task gave one, and no unit outside the range.
func checkCheckpoints(t *testing.T, c Case, p plan) {
	bySet := map[string]source.Checkpoint{}
	for _, cp := range p.cps {
		if _, dup := bySet[cp.ResourceSet]; dup {
			t.Errorf("two checkpoints for resource set %q", cp.ResourceSet)
		}
		bySet[cp.ResourceSet] = cp
	}
	for _, set := range c.Sets {
		if _, ok := bySet[set]; !ok {
			t.Errorf("no checkpoint for resource set %q (got %v)", set, p.cps)
		}
	}
	for set, want := range c.Checkpoints {
		if got := bySet[set].Next; !got.Equal(want) {
			t.Errorf("checkpoint of %q = %v, want %v", set, got, want)
		}
	}
	for _, u := range p.units {
		var set string
		switch {
		case u.Package != nil:
			set = u.Package.ResourceSet
		case u.Record != nil:
			set = u.Record.ResourceSet
		default:
			continue
		}
		cp, ok := bySet[set]
		if !ok {
			t.Errorf("a unit of resource set %q, which has no checkpoint", set)
			continue
		}
		switch c.Task.Mode {
		case source.Baseline:
			if u.Package != nil && !u.Package.At.IsZero() && cp.Next.After(u.Package.At) {
				t.Errorf("checkpoint of %q (%v) is ahead of package %s's snapshot (%v)", set, cp.Next, u.Package.URL, u.Package.At)
			}
		case source.Incremental:
			if u.Package != nil && !source.Intersects(u.Package.From, u.Package.Until, cp.From, cp.Until) {
				t.Errorf("package %s [%v, %v] is outside the range of %q [%v, %v]", u.Package.URL, u.Package.From, u.Package.Until, set, cp.From, cp.Until)
			}
		}
	}
	if c.Task.Mode != source.Incremental {
		return
	}
	for _, cp := range p.cps {
		if cp.Next.Before(cp.From) || cp.Next.After(cp.Until) {
			t.Errorf("checkpoint of %q: next %v outside its range [%v, %v]", cp.ResourceSet, cp.Next, cp.From, cp.Until)
		}
		if !c.Task.From.IsZero() && !cp.From.Equal(c.Task.From) {
			t.Errorf("checkpoint of %q: from %v, the task says %v", cp.ResourceSet, cp.From, c.Task.From)
		}
		if c.Task.Until.IsZero() {
			if cp.Until.After(time.Now()) && !cp.Until.Equal(cp.From) {
				t.Errorf("checkpoint of %q: until %v is in the future", cp.ResourceSet, cp.Until)
			}
		} else if !cp.Next.Equal(c.Task.Until) && !cp.From.After(c.Task.Until) {
			t.Errorf("checkpoint of %q: next %v, want the task's until %v", cp.ResourceSet, cp.Next, c.Task.Until)
		}
	}
}

// checkRefusal: when emit refuses the k-th unit, Plan ends with that
// error and emits nothing after it.
func checkRefusal(t *testing.T, c Case, total int) {
	for k := range min(total, 4) {
		refused := fmt.Errorf("refused unit %d", k)
		n := 0
		p := c.plan(context.Background(), func(context.Context, source.Unit) error {
			n++
			if n > k+1 {
				t.Errorf("refusing unit %d: unit %d was emitted after it", k, n-1)
			}
			if n == k+1 {
				return refused
			}
			return nil
		})
		if !errors.Is(p.err, refused) {
			t.Errorf("refusing unit %d: Plan returned %v, want the refusal", k, p.err)
		}
	}
}

// checkCancel: a cancelled context ends the plan with its error.
func checkCancel(t *testing.T, c Case) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := c.plan(ctx, nil)
	if !errors.Is(p.err, context.Canceled) {
		t.Errorf("cancelled: Plan returned %v, want context.Canceled", p.err)
	}
	for _, u := range p.units {
		if u.Package != nil || u.Record != nil {
			t.Errorf("cancelled: a unit of work was emitted")
			break
		}
	}
}

// checkRepeat: the same task on the same source plans the same units in
// the same order (in any order for an Unordered case), and the same
// checkpoints (a run that resumes relies on it).
func checkRepeat(t *testing.T, c Case, first plan) {
	second := c.plan(context.Background(), nil)
	if second.err != nil {
		t.Fatalf("second Plan: %v", second.err)
	}
	a, b := describe(first.units), describe(second.units)
	if c.Unordered {
		slices.Sort(a)
		slices.Sort(b)
	}
	if !slices.Equal(a, b) {
		t.Errorf("second plan differs:\n first %v\nsecond %v", a, b)
	}
	if len(first.cps) != len(second.cps) {
		t.Errorf("second plan has %d checkpoints, the first %d", len(second.cps), len(first.cps))
		return
	}
	for i := range first.cps {
		a, b := first.cps[i], second.cps[i]
		if a.ResourceSet != b.ResourceSet || !a.From.Equal(b.From) || !a.Next.Equal(b.Next) || a.Open != b.Open {
			t.Errorf("checkpoint %d differs: %+v, then %+v", i, a, b)
		}
	}
}

func describe(us []source.Unit) []string {
	var out []string
	for _, u := range us {
		switch {
		case u.Package != nil:
			out = append(out, "package "+u.Package.URL)
		case u.Record != nil:
			out = append(out, "record "+u.Record.URI)
		case u.Failure != nil:
			out = append(out, "failure "+u.Failure.URI)
		case u.Document != nil:
			out = append(out, "document "+u.Document.URL)
		case u.Mark != nil:
			out = append(out, "mark "+u.Mark.ResourceSet+" "+u.Mark.Key)
		case u.Skip != nil:
			out = append(out, "skip "+u.Skip.URI)
		}
	}
	return out
}

// checkParts: a Parter's parts, each planned alone from its plan, emit
// together the whole plan's packages and records, each once, and its
// documents; the task's checkpoints are the whole plan's sets, never ahead
// of its.
func checkParts(ctx context.Context, t *testing.T, c Case, whole plan) {
	pr := c.Planner.(source.Parter)
	var (
		parts []string
		plans = map[string][]byte{}
	)
	cps, err := pr.Parts(ctx, c.Task, c.held(), func(_ context.Context, name string, plan []byte) error {
		parts = append(parts, name)
		plans[name] = plan
		return nil
	})
	if errors.Is(err, source.ErrIndivisible) {
		if c.Parts != 0 {
			t.Errorf("the task does not divide (%v), want %d parts", err, c.Parts)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parts: %v", err)
	}
	if c.Parts != 0 && len(parts) != c.Parts {
		t.Errorf("%d parts, want %d: %q", len(parts), c.Parts, parts)
	}
	if len(parts) == 0 {
		t.Fatalf("Parts divided the task into no part, without ErrIndivisible")
	}
	if len(parts) != len(slices.Compact(slices.Sorted(slices.Values(parts)))) {
		t.Errorf("parts named twice: %q", parts)
	}
	var all plan
	for _, name := range parts {
		pc := c
		pc.Task.Part, pc.Task.PartPlan = name, plans[name]
		p := pc.plan(ctx, nil)
		if p.err != nil {
			t.Fatalf("Plan of part %q: %v", name, p.err)
		}
		all.units = append(all.units, p.units...)
	}
	want, got := describe(whole.units), describe(all.units)
	for _, what := range []string{"package ", "record "} {
		of := func(d string) bool { return !strings.HasPrefix(d, what) }
		sameSet(t, what+"units of the parts", slices.DeleteFunc(slices.Clone(got), of), slices.DeleteFunc(slices.Clone(want), of))
	}
	docs := func(ds []string) []string {
		ds = slices.DeleteFunc(slices.Clone(ds), func(d string) bool { return !strings.HasPrefix(d, "document ") })
		slices.Sort(ds)
		return slices.Compact(ds)
	}
	sameSet(t, "documents of the parts", docs(got), docs(want))
	var sets []string
	for _, cp := range cps {
		sets = append(sets, cp.ResourceSet)
	}
	sameSet(t, "checkpointed sets of the parts", sets, c.Sets)
}
