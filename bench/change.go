package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rsharvest/rsharvest/manifest"
)

// Change is one change of a generated Change Dump, as ChangesIn reports it.
type Change struct {
	// Package is the number (1-based) of the Change Dump package that
	// holds the change.
	Package int
	// URI is the changed resource's URI (the manifest's <loc>).
	URI string
	// Kind is "created", "updated" or "deleted".
	Kind string
	// Time is the time of the change (the manifest's <lastmod> and rs:md
	// datetime): whole seconds, strictly increasing within a package.
	Time time.Time
	// Length is the length of the resource's body after the change; 0 for
	// a deletion.
	Length int64
}

// Tuning of the synthetic change stream. The recently created or updated
// resources and the recently deleted ones are kept in rings of ringSize, so
// that resources change more than once, within a package and across
// packages, and deleted ones come back.
const (
	ringSize = 64
	// hotUpdate and hotDelete are the shares of updates and deletions that
	// pick a recently changed resource rather than any resource.
	hotUpdate = 0.3
	hotDelete = 0.4
	// recreate is the share of creations that bring back a recently
	// deleted resource rather than a new one.
	recreate = 0.5
	// uniformTries bounds the random draws for an existing resource before
	// a scan finds one.
	uniformTries = 16
)

// normalizeChanges validates the Change Dump options of o and sets their
// defaults.
func normalizeChanges(o *GenOptions) error {
	if o.ChangePackages < 0 || o.ChangesPerPackage < 0 || o.ChangeInterval < 0 {
		return fmt.Errorf("bench: ChangePackages %d, ChangesPerPackage %d and ChangeInterval %v must not be negative",
			o.ChangePackages, o.ChangesPerPackage, o.ChangeInterval)
	}
	if o.ChangePackages == 0 {
		return nil // no Change Dump: its other options do not matter
	}
	if o.ChangesPerPackage == 0 {
		o.ChangesPerPackage = max(1, o.Resources/20)
	}
	if o.ChangeInterval == 0 {
		o.ChangeInterval = DefaultChangeInterval
	}
	if o.ChangeInterval%time.Second != 0 {
		return fmt.Errorf("bench: ChangeInterval %v is not a whole number of seconds", o.ChangeInterval)
	}
	if int64(o.ChangeInterval/time.Second) < int64(o.ChangesPerPackage) {
		return fmt.Errorf("bench: ChangeInterval %v holds fewer whole seconds than the %d changes of a package",
			o.ChangeInterval, o.ChangesPerPackage)
	}
	if o.ChangeStart.IsZero() {
		o.ChangeStart = o.At
	}
	o.ChangeStart = o.ChangeStart.UTC()
	if t := o.ChangeStart.Truncate(time.Second); !t.Equal(o.ChangeStart) {
		o.ChangeStart = t.Add(time.Second)
	}
	for _, s := range []*float64{&o.CreateShare, &o.DeleteShare} {
		if math.IsNaN(*s) || *s > 1 {
			return fmt.Errorf("bench: CreateShare %v and DeleteShare %v must be at most 1", o.CreateShare, o.DeleteShare)
		}
	}
	switch {
	case o.CreateShare == 0:
		o.CreateShare = DefaultCreateShare
	case o.CreateShare < 0:
		o.CreateShare = 0
	}
	switch {
	case o.DeleteShare == 0:
		o.DeleteShare = DefaultDeleteShare
	case o.DeleteShare < 0:
		o.DeleteShare = 0
	}
	if o.CreateShare+o.DeleteShare > 1 {
		return fmt.Errorf("bench: CreateShare %v and DeleteShare %v add up to more than 1", o.CreateShare, o.DeleteShare)
	}
	return nil
}

// change is one change of the synthetic change stream: the resource index,
// the version it produces (every change of a resource, deletions included,
// counts one version; the baseline is version 0) and its kind and time.
type change struct {
	index   int
	version int
	kind    manifest.Change
	time    time.Time
}

// changeName names Change Dump package k, 1-based ("change-00001").
func (p *plan) changeName(k int) string { return fmt.Sprintf("change-%0*d", p.changeWidth, k) }

// changeFrom returns the start of package k's (1-based) interval; its end
// is changeFrom(k+1).
func (p *plan) changeFrom(k int) time.Time {
	return p.o.ChangeStart.Add(time.Duration(k-1) * p.o.ChangeInterval)
}

// open reports whether package k (1-based) is open: the last one, unless
// ClosedLast.
func (p *plan) open(k int) bool { return k == p.o.ChangePackages && !p.o.ClosedLast }

// revision derives resource i as it is after the change that made version
// v (≥ 1): the URI, kind and media type of resource i, a fresh size and
// body, and a path of its own in the package.
func (p *plan) revision(i, v int, at time.Time) resource {
	r := p.resource(i)
	stream := uint64(v) << 8
	rng := rand.New(rand.NewPCG(seedMix(p.o.Seed, i, stream|1), seedMix(p.o.Seed, i, stream|2)))
	storedDraw := rng.Float64()
	sizeDraw := rng.NormFloat64()
	uniformDraw := rng.Float64()
	r.stored = p.stored(r.text, storedDraw)
	r.size = p.size(sizeDraw, uniformDraw)
	r.seed = int64(seedMix(p.o.Seed, i, stream|3))
	ext := ".bin"
	if r.text {
		ext = ".txt"
	}
	r.zipPath = fmt.Sprintf("changes/r%0*d-v%d%s", p.nameWidth, i, v, ext)
	r.lastmod = at
	return r
}

// resState is what the change stream knows of a resource it has touched:
// its version and the kind of its latest change.
type resState struct {
	version int
	kind    manifest.Change
}

// ring keeps the last ringSize resource indexes added to it.
type ring struct {
	buf  [ringSize]int
	n    int // entries held, at most ringSize
	next int // slot of the next add
}

func (r *ring) add(i int) {
	r.buf[r.next] = i
	r.next = (r.next + 1) % ringSize
	r.n = min(r.n+1, ringSize)
}

// pick returns a random entry. With sparse it draws a slot among all
// ringSize and returns false when that slot is still empty, so that a ring
// that is filling up does not return its few entries over and over;
// otherwise it returns false only when the ring is empty.
func (r *ring) pick(rng *rand.Rand, sparse bool) (int, bool) {
	n := r.n
	if sparse {
		n = ringSize
	}
	if n == 0 {
		return 0, false
	}
	j := rng.IntN(n)
	if j >= r.n {
		return 0, false
	}
	return r.buf[j], true
}

// latest returns the most recently added entry for which ok is true.
func (r *ring) latest(ok func(i int) bool) (int, bool) {
	for j := 1; j <= r.n; j++ {
		if i := r.buf[(r.next-j+ringSize)%ringSize]; ok(i) {
			return i, true
		}
	}
	return 0, false
}

// changeStream simulates the changes, package by package, in order. It
// keeps the state of every resource it has touched (a map entry per
// resource, never a body) and two small rings, so its memory grows with
// the number of distinct resources changed, not with the bodies.
type changeStream struct {
	p       *plan
	touched map[int]resState
	alive   int // resources that exist now
	next    int // the next new resource index
	hot     ring
	dead    ring
	buf     []change
	kindBuf []manifest.Change
}

func newChangeStream(p *plan) *changeStream {
	return &changeStream{p: p, touched: make(map[int]resState), alive: p.o.Resources, next: p.o.Resources}
}

// exists reports whether resource i exists now.
func (s *changeStream) exists(i int) bool {
	if st, ok := s.touched[i]; ok {
		return st.kind != manifest.Deleted
	}
	return i < s.p.o.Resources
}

// version returns resource i's current version.
func (s *changeStream) version(i int) int { return s.touched[i].version }

// pickExisting returns an existing resource: with probability hot one of
// the recently created or updated ones, otherwise any. There must be one.
func (s *changeStream) pickExisting(rng *rand.Rand, hot float64) int {
	if rng.Float64() < hot {
		if i, ok := s.hot.pick(rng, true); ok && s.exists(i) {
			return i
		}
	}
	i := 0
	for range uniformTries {
		i = rng.IntN(s.next)
		if s.exists(i) {
			return i
		}
	}
	for !s.exists(i) {
		i = (i + 1) % s.next
	}
	return i
}

// pickCreate returns a resource to create: a recently deleted one or a new
// one.
func (s *changeStream) pickCreate(rng *rand.Rand) int {
	if rng.Float64() < recreate {
		if i, ok := s.dead.pick(rng, false); ok && !s.exists(i) {
			return i
		}
	}
	i := s.next
	s.next++
	return i
}

// nextPackage simulates package k (1-based) and returns its changes, in
// order. The slice is reused by the next call.
//
// The package's interval [from, until] is split into ChangesPerPackage
// runs of whole seconds; the first change is at from exactly and each
// other change at a random second of its run, so the times are strictly
// increasing and the last one is before until (the next package's from).
func (s *changeStream) nextPackage(k int) []change {
	p := s.p
	rng := rand.New(rand.NewPCG(seedMix(p.o.Seed, k, 31), seedMix(p.o.Seed, k, 32)))
	from, n := p.changeFrom(k), int64(p.o.ChangesPerPackage)
	s.buf = s.buf[:0]
	// The first creation, deletion and update of every package after the
	// first re-create a resource deleted in an earlier package, delete one
	// updated in an earlier package and update one created in an earlier
	// package, whenever there is one: so do the cases a Destination must
	// get right occur in every Change Dump of a few packages.
	prevHot, prevDead := s.hot, s.dead
	created, deleted, updated := k == 1, k == 1, k == 1
	lastKind := func(kind manifest.Change) func(int) bool {
		return func(i int) bool { return s.touched[i].kind == kind }
	}
	kinds := s.kinds(rng, int(n))
	for j := range n {
		lo, hi := j*p.slots/n, (j+1)*p.slots/n
		off := lo
		if j > 0 {
			off += rng.Int64N(hi - lo)
		}
		c := change{time: from.Add(time.Duration(off) * time.Second)}
		var ok bool
		switch {
		case s.alive == 0 || kinds[j] == manifest.Created:
			c.kind = manifest.Created
			if !created {
				created = true
				c.index, ok = prevDead.latest(lastKind(manifest.Deleted))
			}
			if !ok {
				c.index = s.pickCreate(rng)
			}
		case kinds[j] == manifest.Deleted:
			c.kind = manifest.Deleted
			if !deleted {
				deleted = true
				c.index, ok = prevHot.latest(lastKind(manifest.Updated))
			}
			if !ok {
				c.index = s.pickExisting(rng, hotDelete)
			}
		default:
			c.kind = manifest.Updated
			if !updated {
				updated = true
				c.index, ok = prevHot.latest(lastKind(manifest.Created))
			}
			if !ok {
				c.index = s.pickExisting(rng, hotUpdate)
			}
		}
		c.version = s.version(c.index) + 1
		s.touched[c.index] = resState{version: c.version, kind: c.kind}
		switch c.kind {
		case manifest.Created:
			s.alive++
			s.hot.add(c.index)
		case manifest.Deleted:
			s.alive--
			s.dead.add(c.index)
		default:
			s.hot.add(c.index)
		}
		s.buf = append(s.buf, c)
	}
	return s.buf
}

// kinds returns the kinds of the n changes of a package in a random
// order: CreateShare×n creations and DeleteShare×n deletions (rounded up or
// down at random, so the shares hold on average), the rest updates. The
// slice is reused by the next call.
func (s *changeStream) kinds(rng *rand.Rand, n int) []manifest.Change {
	count := func(share float64) int {
		x := share * float64(n)
		c := int(x)
		if rng.Float64() < x-float64(c) {
			c++
		}
		return c
	}
	creates := count(s.p.o.CreateShare)
	deletes := min(count(s.p.o.DeleteShare), n-creates)
	s.kindBuf = s.kindBuf[:0]
	for j := range n {
		switch {
		case j < creates:
			s.kindBuf = append(s.kindBuf, manifest.Created)
		case j < creates+deletes:
			s.kindBuf = append(s.kindBuf, manifest.Deleted)
		default:
			s.kindBuf = append(s.kindBuf, manifest.Updated)
		}
	}
	rng.Shuffle(n, func(a, b int) { s.kindBuf[a], s.kindBuf[b] = s.kindBuf[b], s.kindBuf[a] })
	return s.kindBuf
}

// ChangesIn calls fn with every change of the Change Dump that opts
// describe, in order: package by package, in forward chronological order
// within each. Like Truth it regenerates everything from the options and
// ignores opts.Dir. An error from fn stops the walk and is returned.
func ChangesIn(ctx context.Context, opts GenOptions, fn func(c Change) error) error {
	p, err := newPlan(opts)
	if err != nil {
		return err
	}
	s := newChangeStream(p)
	for k := 1; k <= p.o.ChangePackages; k++ {
		for _, c := range s.nextPackage(k) {
			if err := ctx.Err(); err != nil {
				return err
			}
			ch := Change{Package: k, Kind: string(c.kind), Time: c.time}
			if c.kind == manifest.Deleted {
				ch.URI = p.resource(c.index).uri
			} else {
				r := p.revision(c.index, c.version, c.time)
				ch.URI, ch.Length = r.uri, r.size
			}
			if err := fn(ch); err != nil {
				return fmt.Errorf("bench: change of %s: %w", ch.URI, err)
			}
		}
	}
	return nil
}

// TruthAfter calls fn with every resource that exists after the Resource
// Dump's snapshot and Change Dump packages 1 to k: its URI and its body as
// the latest of those changes left it. Deleted resources are left out;
// k = 0 gives what Truth gives, and k past the last package is the last
// package. Resources come in index order: the baseline's, then the created
// ones. The body is valid only during the call. Nothing is read from or
// written to disk; opts.Dir is ignored. An error from fn stops the walk and
// is returned.
func TruthAfter(ctx context.Context, opts GenOptions, k int, fn func(uri string, body io.Reader) error) error {
	if k < 0 {
		return errors.New("bench: TruthAfter needs k ≥ 0")
	}
	p, err := newPlan(opts)
	if err != nil {
		return err
	}
	s := newChangeStream(p)
	for pkg := 1; pkg <= min(k, p.o.ChangePackages); pkg++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.nextPackage(pkg)
	}
	br := newBodyReader(p.words)
	for i := range s.next {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !s.exists(i) {
			continue
		}
		var r resource
		if v := s.version(i); v == 0 {
			r = p.resource(i)
		} else {
			r = p.revision(i, v, time.Time{})
		}
		br.reset(r.seed, i, r.size, r.text)
		if err := fn(r.uri, br); err != nil {
			return fmt.Errorf("bench: truth for %s: %w", r.uri, err)
		}
	}
	return nil
}
