package pipeline

import (
	"hash/maphash"
	"sync/atomic"
)

// freshBits is the size of a freshFilter: 1 MiB whatever the run's size.
// Past a few million URIs its false positives grow, and each costs no more
// than the lookup the filter saves.
const freshBits = 1 << 23

// freshFilter answers "might this run have recorded uri?" for a run whose
// source had no record in the state when it began: then only the run's own
// commits can hold a record of a URI, so "is this already held?" (holding)
// asks the state only for the URIs the filter may have seen. It is a Bloom
// filter of the URIs the commit stage received, three bits each, of fixed
// size: a URI added is always reported, one never added rarely. Its
// methods are safe for concurrent use.
type freshFilter struct {
	seed maphash.Seed
	bits []atomic.Uint64
}

func newFreshFilter() *freshFilter {
	return &freshFilter{seed: maphash.MakeSeed(), bits: make([]atomic.Uint64, freshBits/64)}
}

// positions calls fn with the bit positions of uri.
func (f *freshFilter) positions(uri string, fn func(word int, mask uint64) bool) bool {
	h := maphash.String(f.seed, uri)
	a, b := uint32(h), uint32(h>>32)|1
	for i := range uint32(3) {
		p := (a + i*b) % freshBits
		if !fn(int(p/64), 1<<(p%64)) {
			return false
		}
	}
	return true
}

// add records that the run may hold a record of uri.
func (f *freshFilter) add(uri string) {
	f.positions(uri, func(w int, m uint64) bool { f.bits[w].Or(m); return true })
}

// mayHold reports whether uri may have been added; false means it never was.
func (f *freshFilter) mayHold(uri string) bool {
	return f.positions(uri, func(w int, m uint64) bool { return f.bits[w].Load()&m != 0 })
}
