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
// deleting anything, saying how many it would have deleted. It holds at
// most limit records, and counts the rest. A dry run's deletions are not
// held: it previews the whole plan, then says whether the real run would
// stop.
type deleteGuard struct {
	limit, held int64
	spec        DeleteLimit
	dry         bool
	// would counts the deletions the plan asks for.
	would   int64
	waiting []entryJob
}

// hold takes j, a record deleting a resource the state holds: kept until
// the plan is read whole while the deletions are within the limit,
// counted only past it; a dry run's is sent on at once (send).
func (g *deleteGuard) hold(ctx context.Context, j entryJob, send func(context.Context, entryJob) error) error {
	g.would++
	switch {
	case g.dry:
		return send(ctx, j)
	case g.would <= g.limit:
		g.waiting = append(g.waiting, j)
	}
	return nil
}

// check returns, once the plan is read whole, the error of a run whose
// deletions exceed the limit (wrapping ErrTooManyDeletes, naming how many
// it would have made), or nil.
func (g *deleteGuard) check() error {
	if g == nil || g.would <= g.limit {
		return nil
	}
	err := errclass.Fatalf("%w (%s: at most %d of the %d resources held); nothing was deleted: it would have deleted %d; give a larger --max-delete if the source did remove them", ErrTooManyDeletes, g.spec, g.limit, g.held, g.would)
	if g.dry {
		err = fmt.Errorf("the real run would stop before deleting anything: %w", err)
	}
	return err
}

// wouldDelete reports whether record rec deletes a resource the state
// holds (a delete of what is not held, or deleted already, or older than
// the change held, changes nothing).
func (r *run) wouldDelete(ctx context.Context, rec *source.Record) (bool, error) {
	prev, had, err := r.opts.Store.Resource(ctx, r.opts.SourceKey, rec.URI)
	if err != nil {
		return false, err
	}
	return had && !prev.Deleted && !deleteSuperseded(prev, rec), nil
}
