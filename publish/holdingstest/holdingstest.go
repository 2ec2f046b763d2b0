// Package holdingstest is the conformance suite of publish.Holdings: what
// every implementation (the state store's, the es sink's index) must do for
// the publisher, whose two walks of each list within one view must meet the
// same items in the same order.
package holdingstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/state"
)

// Want is what the holdings under test hold, when the caller knows it.
type Want struct {
	// Resources and Changes count what every source holds together;
	// negative: not checked.
	Resources, Changes int64
}

// Run checks h. Within one view:
//   - Sources are sorted and distinct;
//   - each source's Resources walk is the same twice, meets
//     CountResources resources, each of its source, none a tombstone, no
//     URI twice;
//   - each source's Changes walk is the same twice (with and without
//     Superseded but for that flag), of its source, with Recorded stamps
//     strictly increasing; a change that is neither superseded nor a
//     deletion is the last of its resource in the walk;
//   - At is the newest stamp of every source's changes (zero when none);
//   - an error the walk's function returns ends the walk and is returned
//     unchanged, and View returns fn's error unchanged.
func Run(t *testing.T, h publish.Holdings, want Want) {
	t.Helper()
	ctx := t.Context()
	var resources, changes int64
	err := h.View(ctx, func(v publish.View) error {
		srcs, err := v.Sources(ctx)
		if err != nil {
			return err
		}
		if !slices.IsSorted(srcs) || len(slices.Compact(slices.Clone(srcs))) != len(srcs) {
			t.Errorf("Sources %q: not sorted and distinct", srcs)
		}
		var newest time.Time
		for _, src := range srcs {
			rs, err := walkResources(ctx, v, src)
			if err != nil {
				return err
			}
			again, err := walkResources(ctx, v, src)
			if err != nil {
				return err
			}
			if !slices.Equal(rs, again) {
				t.Errorf("source %s: two walks of the resources differ", src)
			}
			if n, err := v.CountResources(ctx, src); err != nil {
				return err
			} else if n != int64(len(rs)) {
				t.Errorf("source %s: CountResources %d, the walk met %d", src, n, len(rs))
			}
			seen := map[string]bool{}
			for _, r := range rs {
				if r.source != src || r.deleted || seen[r.uri] {
					t.Errorf("source %s: resource %+v is another's, a tombstone, or met twice", src, r)
				}
				seen[r.uri] = true
			}
			resources += int64(len(rs))
			cs, err := walkChanges(ctx, v, src, true)
			if err != nil {
				return err
			}
			plain, err := walkChanges(ctx, v, src, false)
			if err != nil {
				return err
			}
			if len(plain) != len(cs) {
				t.Errorf("source %s: %d changes with Superseded, %d without", src, len(cs), len(plain))
			}
			for i := range min(len(plain), len(cs)) {
				a, b := cs[i], plain[i]
				a.superseded, b.superseded = false, false
				if a != b {
					t.Errorf("source %s: change %d is %+v with Superseded, %+v without", src, i, cs[i], plain[i])
				}
			}
			last := map[string]int{}
			for i, c := range cs {
				if c.source != src {
					t.Errorf("source %s: change %+v is another's", src, c)
				}
				if i > 0 && !c.recorded.After(cs[i-1].recorded) {
					t.Errorf("source %s: change %d recorded %v, not after %v", src, i, c.recorded, cs[i-1].recorded)
				}
				last[c.uri] = i
				if c.recorded.After(newest) {
					newest = c.recorded
				}
			}
			for i, c := range cs {
				if !c.superseded && c.change != state.ChangeDeleted && last[c.uri] != i {
					t.Errorf("source %s: change %d of %s is not superseded, yet change %d follows it", src, i, c.uri, last[c.uri])
				}
			}
			changes += int64(len(cs))
		}
		at, err := v.At(ctx)
		if err != nil {
			return err
		}
		if !at.Equal(newest) {
			t.Errorf("At %v, want the newest change's stamp %v", at, newest)
		}
		for _, src := range srcs {
			stop := errors.New("stop")
			if err := v.Resources(ctx, src, func(state.Resource) error { return stop }); err != stop && err != nil {
				t.Errorf("source %s: a stopped resource walk returned %v, want the function's error", src, err)
			}
			if err := v.Changes(ctx, src, false, func(state.ChangeRecord) error { return stop }); err != stop && err != nil {
				t.Errorf("source %s: a stopped change walk returned %v, want the function's error", src, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	if want.Resources >= 0 && resources != want.Resources {
		t.Errorf("%d resources, want %d", resources, want.Resources)
	}
	if want.Changes >= 0 && changes != want.Changes {
		t.Errorf("%d changes, want %d", changes, want.Changes)
	}
	mine := errors.New("fn's own")
	if err := h.View(ctx, func(publish.View) error { return mine }); err != mine {
		t.Errorf("View returned %v, want fn's error unchanged", err)
	}
}

// resource and change are what the suite compares of a walk's items.
type resource struct {
	uri, source string
	deleted     bool
	length      int64
	hashes      string
}

type change struct {
	uri, source, change string
	recorded            time.Time
	length              int64
	hashes              string
	superseded          bool
}

func walkResources(ctx context.Context, v publish.View, src string) ([]resource, error) {
	var out []resource
	err := v.Resources(ctx, src, func(r state.Resource) error {
		out = append(out, resource{r.URI, r.Source, r.Deleted, r.Length, r.Hashes.String()})
		return nil
	})
	return out, err
}

func walkChanges(ctx context.Context, v publish.View, src string, superseded bool) ([]change, error) {
	var out []change
	err := v.Changes(ctx, src, superseded, func(c state.ChangeRecord) error {
		out = append(out, change{c.URI, c.Source, c.Change, c.Recorded, c.Length, c.Hashes.String(), c.Superseded && superseded})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("changes of %s: %w", src, err)
	}
	return out, nil
}
