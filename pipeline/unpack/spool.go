package unpack

import (
	"context"
	"sync"
)

// Spool bounds the packages an incremental run holds on the spool
// disk to Concurrency+1 — downloaded to read their manifest, being
// applied, or kept between the two — however long the range: a package
// holds a slot from before its download until its spool file is removed.
// A package the planner has read is kept (keep) until it is applied
// (take) or its slot is wanted by another download, which then removes
// the package kept longest (it is read again when applied).
type Spool struct {
	mu   sync.Mutex
	free int
	kept []keptPackage // oldest first
	// changed is closed, and replaced, when a slot frees or a package is
	// kept: what a waiting acquire waits for.
	changed chan struct{}
}

type keptPackage struct {
	url string
	sp  *spooled
}

// NewSpool returns a Spool of slots packages.
func NewSpool(slots int) *Spool {
	return &Spool{free: slots, changed: make(chan struct{})}
}

// signal wakes the waiting acquires; c.mu is held.
func (c *Spool) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// acquire waits for a slot, removing the package kept longest when none is
// free, and returns the slot's release (idempotent).
func (c *Spool) acquire(ctx context.Context) (func(), error) {
	for {
		c.mu.Lock()
		if c.free > 0 {
			c.free--
			c.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					c.mu.Lock()
					c.free++
					c.signal()
					c.mu.Unlock()
				})
			}, nil
		}
		if len(c.kept) > 0 {
			victim := c.kept[0]
			c.kept = c.kept[1:]
			c.mu.Unlock()
			victim.sp.Close() // frees its slot
			continue
		}
		wait := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wait:
		}
	}
}

// keep keeps sp, a package holding a slot, until take or an acquire
// removes it.
func (c *Spool) keep(url string, sp *spooled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept = append(c.kept, keptPackage{url: url, sp: sp})
	c.signal()
}

// take returns the package kept for url, which the caller now closes, or
// nil.
func (c *Spool) take(url string) *spooled {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range c.kept {
		if k.url == url {
			c.kept = append(c.kept[:i], c.kept[i+1:]...)
			return k.sp
		}
	}
	return nil
}

// Close removes every package still kept.
func (c *Spool) Close() {
	c.mu.Lock()
	kept := c.kept
	c.kept = nil
	c.mu.Unlock()
	for _, k := range kept {
		k.sp.Close()
	}
}
