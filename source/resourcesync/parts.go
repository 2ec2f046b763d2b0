package resourcesync

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

var _ source.Parter = (*Planner)(nil)

// listSlice is how many of a Resource List's records one part holds.
const listSlice = 1000

// errDivided ends a plan when it has met all the units it divides: the
// walk stops there.
var errDivided = errors.New("divided")

// Parts divides a task (see source.Parter) into its packages, a part each
// (an incremental task's with their winners), and the records it plans
// outside packages — a Resource List's, an incremental task's winning
// deletes and a Change List's winners — listSlice to a part (the k-th
// slice, in the plan's order, of the records a document lists, with how
// many it holds). An incremental task's parts name the end of its range
// (the newest change the plan read, when the task gave none), so that a
// worker planning one later decides the same winners. A task whose plan
// met a failure or left something out does not divide (no parts): run
// whole, it holds its checkpoints as a whole run does.
func (d *Planner) Parts(ctx context.Context, task source.Task, held source.Holdings) ([]string, []source.Checkpoint, error) {
	if task.Part != "" {
		return nil, nil, errclass.Fatalf("resourcesync: part %q cannot be divided", task.Part)
	}
	var (
		units []string
		lists []listPart // in the order first met
		at    = map[string]int{}
		clean = true
	)
	cps, err := d.Plan(ctx, task, held, func(ctx context.Context, u source.Unit) error {
		switch {
		case u.Package != nil:
			units = append(units, url.Values{"package": {u.Package.URL}}.Encode())
		case u.Record != nil:
			l := u.Record.Listed
			i, ok := at[l]
			if !ok {
				i, at[l] = len(lists), len(lists)
				lists = append(lists, listPart{list: l})
			}
			lists[i].add(u.Record.URI)
		case u.Failure != nil, u.Skip != nil:
			clean = false
			return errDivided
		}
		return ctx.Err()
	})
	if !clean || errors.Is(err, errDivided) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, l := range lists {
		for k := range l.slices {
			units = append(units, l.slice(k))
		}
	}
	until := ""
	if task.Mode == source.Incremental {
		end := task.Until
		for _, cp := range cps {
			if end.IsZero() || cp.Until.After(end) {
				end = cp.Until
			}
			if task.Until.IsZero() && cp.Next.After(end) {
				end = cp.Next
			}
		}
		until = end.UTC().Format(time.RFC3339Nano)
	}
	parts := make([]string, len(units))
	for i, u := range units {
		parts[i] = u
		if until != "" {
			parts[i] += "&" + url.Values{"until": {until}}.Encode()
		}
	}
	return parts, cps, nil
}

// listPart is the slices of the records a document lists: of each, its
// first and last URI and how many it holds.
type listPart struct {
	list   string
	slices []slice
}

type slice struct {
	first, last string
	n           int
}

// add adds the document's next record.
func (l *listPart) add(uri string) {
	if len(l.slices) == 0 || l.slices[len(l.slices)-1].n == listSlice {
		l.slices = append(l.slices, slice{first: uri})
	}
	s := &l.slices[len(l.slices)-1]
	s.last = uri
	s.n++
}

// slice names the part of the k-th slice of the list's records: the
// document, the slice's place, how many records it holds, and its first
// and last (a list that changed meanwhile does not plan the same slice).
func (l listPart) slice(k int) string {
	s := l.slices[k]
	return url.Values{"list": {l.list}, "slice": {strconv.Itoa(k)}, "n": {strconv.Itoa(s.n)}, "first": {s.first}, "last": {s.last}}.Encode()
}

// planPart plans part of task (see Parts): the whole plan, of which only
// the part's package, or its slice of a document's records, is emitted,
// with every failure the plan meets (it may hold the part's set) and the
// change documents it read. A part the
// walk does not find whole — the source's documents changed since the task
// was divided — fails temporarily.
func (d *Planner) planPart(ctx context.Context, task source.Task, held source.Holdings, emit func(context.Context, source.Unit) error) ([]source.Checkpoint, error) {
	v, err := url.ParseQuery(task.Part)
	if err != nil {
		return nil, errclass.Fatalf("resourcesync: part %q: %w", task.Part, err)
	}
	pkg, list := v.Get("package"), v.Get("list")
	if u := v.Get("until"); u != "" {
		if task.Until, err = time.Parse(time.RFC3339Nano, u); err != nil {
			return nil, errclass.Fatalf("resourcesync: part %q: %w", task.Part, err)
		}
	}
	k, _ := strconv.Atoi(v.Get("slice"))
	want, _ := strconv.Atoi(v.Get("n"))
	if pkg != "" {
		want = 1
	}
	if (pkg == "") == (list == "") || want <= 0 {
		return nil, errclass.Fatalf("resourcesync: part %q: not a part of a task", task.Part)
	}
	task.Part = ""
	got, seen := 0, 0
	var first, last string
	cps, err := d.Plan(ctx, task, held, func(ctx context.Context, u source.Unit) error {
		switch {
		case u.Package != nil:
			if u.Package.URL != pkg {
				return nil
			}
		case u.Record != nil:
			if u.Record.Listed != list {
				return nil
			}
			i := seen
			seen++
			if i/listSlice != k {
				return nil
			}
			if first == "" {
				first = u.Record.URI
			}
			last = u.Record.URI
		case u.Failure != nil, u.Document != nil:
			return emit(ctx, u)
		default:
			return nil
		}
		got++
		return emit(ctx, u)
	})
	if err != nil {
		return nil, err
	}
	if got != want || list != "" && (first != v.Get("first") || last != v.Get("last")) {
		return nil, errclass.NewRetryable(fmt.Errorf("resourcesync: part %q: %d of its %d units found: the source's documents changed since the harvest was divided", task.Part, got, want))
	}
	return cps, nil
}
