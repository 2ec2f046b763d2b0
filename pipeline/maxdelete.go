package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/source"
)

// DeleteLimit bounds the resources one run may delete (--max-delete): a
// count, or a percentage of those held when the run begins. Its zero
// value sets no bound.
type DeleteLimit struct {
	N       int64
	Percent float64
	// pct says Percent is the bound; set that there is one.
	pct, set bool
}

// ParseDeleteLimit reads "N" (a count) or "P%" (a percentage of the
// resources held); "" sets no bound.
func ParseDeleteLimit(s string) (DeleteLimit, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DeleteLimit{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v > 100 || math.IsNaN(v) {
			return DeleteLimit{}, fmt.Errorf("%q: want a count (100) or a percentage from 0%% to 100%% (5%%)", s)
		}
		return DeleteLimit{Percent: v, pct: true, set: true}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return DeleteLimit{}, fmt.Errorf("%q: want a count (100) or a percentage from 0%% to 100%% (5%%)", s)
	}
	return DeleteLimit{N: n, set: true}, nil
}

// UnmarshalText reads l as ParseDeleteLimit does (--max-delete).
func (l *DeleteLimit) UnmarshalText(b []byte) error {
	v, err := ParseDeleteLimit(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// IsSet reports whether l bounds anything.
func (l DeleteLimit) IsSet() bool { return l.set }

// String is l as ParseDeleteLimit reads it.
func (l DeleteLimit) String() string {
	switch {
	case !l.set:
		return ""
	case l.pct:
		return strconv.FormatFloat(l.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(l.N, 10)
}

// of is the count l allows when held resources are held.
func (l DeleteLimit) of(held int64) int64 {
	if l.pct {
		return int64(math.Floor(float64(held) * l.Percent / 100))
	}
	return l.N
}

// ErrTooManyDeletes is wrapped by the error of a run that stopped because
// it would delete more than Options.MaxDelete allows; it deleted nothing.
var ErrTooManyDeletes = errors.New("the run would delete more than --max-delete allows")

// deleteGuard holds back a run's deletions until its plan is read whole,
// so that a run that would delete more than its limit stops before
// deleting anything. It holds at most limit+1 records.
type deleteGuard struct {
	limit, held int64
	spec        DeleteLimit
	waiting     []entryJob
}

// hold keeps j, a record deleting a resource the state holds, until
// release; past the limit it returns an error wrapping
// ErrTooManyDeletes.
func (g *deleteGuard) hold(j entryJob) error {
	g.waiting = append(g.waiting, j)
	if int64(len(g.waiting)) > g.limit {
		return errclass.Fatalf("%w (%s: at most %d of the %d resources held); nothing was deleted: give a larger --max-delete if the source did remove them", ErrTooManyDeletes, g.spec, g.limit, g.held)
	}
	return nil
}

// wouldDelete reports whether record rec deletes a resource the state
// holds (a delete of what is not held, or deleted already, changes
// nothing).
func (r *run) wouldDelete(ctx context.Context, rec *source.Record) (bool, error) {
	prev, had, err := r.opts.Store.Resource(ctx, r.opts.SourceKey, rec.URI)
	if err != nil {
		return false, err
	}
	return had && !prev.Deleted, nil
}
