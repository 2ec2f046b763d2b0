package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rsharvest/rsharvest/errclass"
)

// prepare fills opts' defaults and gives the run a spool directory of its
// own; the returned function removes it.
func prepare(opts Options) (Options, func(), error) {
	if err := opts.defaults(); err != nil {
		return opts, nil, err
	}
	spool, cleanup, err := makeSpool(opts.SpoolDir)
	if err != nil {
		return opts, nil, err
	}
	opts.SpoolDir = spool
	return opts, cleanup, nil
}

// spoolPrefix names the per-process spool directories under SpoolDir.
const spoolPrefix = "rsharvest-spool-"

// makeSpool creates this run's spool directory under base, named after the
// process, and first removes those left by processes that no longer run (a
// run killed with -9 cannot clean up after itself). The returned function
// removes the directory.
func makeSpool(base string) (string, func(), error) {
	if entries, err := os.ReadDir(base); err == nil {
		for _, e := range entries {
			if pid, ok := spoolOwner(e.Name()); ok && e.IsDir() && !alive(pid) {
				os.RemoveAll(filepath.Join(base, e.Name()))
			}
		}
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("%s%d-", spoolPrefix, os.Getpid()))
	if err != nil {
		return "", nil, errclass.Fatalf("spool: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// spoolOwner returns the process id in a spool directory's name.
func spoolOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, spoolPrefix)
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

// alive reports whether a process with this id exists.
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// spoolCache bounds the packages an incremental run holds on the spool
// disk to Concurrency+1 — downloaded to read their manifest, being
// applied, or kept between the two — however long the range: a package
// holds a slot from before its download until its spool file is removed.
// A package the planner has read is kept (keep) until it is applied
// (take) or its slot is wanted by another download, which then removes
// the package kept longest (it is read again when applied).
type spoolCache struct {
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

func newSpoolCache(slots int) *spoolCache {
	return &spoolCache{free: slots, changed: make(chan struct{})}
}

// signal wakes the waiting acquires; c.mu is held.
func (c *spoolCache) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// acquire waits for a slot, removing the package kept longest when none is
// free, and returns the slot's release (idempotent).
func (c *spoolCache) acquire(ctx context.Context) (func(), error) {
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
func (c *spoolCache) keep(url string, sp *spooled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kept = append(c.kept, keptPackage{url: url, sp: sp})
	c.signal()
}

// take returns the package kept for url, which the caller now closes, or
// nil.
func (c *spoolCache) take(url string) *spooled {
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

// close removes every package still kept.
func (c *spoolCache) close() {
	c.mu.Lock()
	kept := c.kept
	c.kept = nil
	c.mu.Unlock()
	for _, k := range kept {
		k.sp.Close()
	}
}
