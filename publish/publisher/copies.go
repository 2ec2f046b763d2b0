package publisher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/rsharvest/rsharvest/publish"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// SiteCopies gives back each held body from the sinks of the registry site
// whose source holds it: what publish serve serves as copies when no one
// sink holds them all (a sink per site). It opens a site's sinks when
// first asked for one of its copies. Safe for concurrent use.
type SiteCopies struct {
	Store *state.Store
	// Sinks opens the sites' sinks.
	Sinks sink.Registry

	mu   sync.Mutex
	open map[string]sink.Sink // by spec; nil: not an inventory
	// sources are the sources by the directory of their set, read again
	// when a directory is missing and they are older than refreshSets.
	sources map[string]string
	read    time.Time
}

// refreshSets is how often, at most, SiteCopies reads the sets' directories
// again for one it does not know.
const refreshSets = 10 * time.Second

var _ publish.SetCopies = (*SiteCopies)(nil)

// Get opens the copy of uri that a sink of a site holding it keeps; an
// error satisfying errors.Is(err, fs.ErrNotExist) when none does.
func (c *SiteCopies) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	return c.get(ctx, "", uri)
}

// GetIn opens the copy of uri that a sink keeps of the site whose source
// is published in the set directory setDir (publish.SetDirs).
func (c *SiteCopies) GetIn(ctx context.Context, setDir, uri string) (io.ReadCloser, error) {
	src, err := c.sourceOf(ctx, setDir)
	if err != nil {
		return nil, err
	}
	if src == "" {
		return nil, fmt.Errorf("no resource set is published as %s: %w", setDir, fs.ErrNotExist)
	}
	return c.get(ctx, src, uri)
}

// sourceOf returns the source whose set is published in setDir ("": none).
func (c *SiteCopies) sourceOf(ctx context.Context, setDir string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if src, ok := c.sources[setDir]; ok || time.Since(c.read) < refreshSets {
		return src, nil
	}
	err := publish.FromState(c.Store).View(ctx, func(v publish.View) error {
		dirs, err := publish.SetDirs(ctx, v)
		c.sources = map[string]string{}
		for s, d := range dirs {
			c.sources[d] = s
		}
		return err
	})
	c.read = time.Now()
	return c.sources[setDir], err
}

// get opens the copy of uri a sink of a site keeps whose source is src
// ("": any) and holds uri.
func (c *SiteCopies) get(ctx context.Context, src, uri string) (io.ReadCloser, error) {
	sites, err := site.Registry{Store: c.Store}.Sites(ctx)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, s := range sites {
		key := state.SourceKey(s.Source())
		if src != "" && key != src {
			continue
		}
		if _, held, err := c.Store.Resource(ctx, key, uri); err != nil || !held {
			if err != nil {
				return nil, err
			}
			continue
		}
		for _, spec := range s.Sinks() {
			inv, err := c.inventory(ctx, spec)
			if err != nil {
				firstErr = cmpErr(firstErr, fmt.Errorf("site %s: %w", s.Name, err))
				continue
			}
			if inv == nil {
				continue
			}
			rc, err := inv.Get(ctx, uri)
			if err == nil {
				return rc, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				firstErr = cmpErr(firstErr, err)
			}
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, fmt.Errorf("no site's sink holds a copy of %s: %w", uri, fs.ErrNotExist)
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// inventory returns the sink of spec as an inventory, opening it the
// first time (nil: the sink cannot give back what it holds).
func (c *SiteCopies) inventory(ctx context.Context, spec string) (sink.Inventory, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]sink.Sink{}
	}
	s, ok := c.open[spec]
	if !ok {
		var err error
		if s, err = c.Sinks.Open(ctx, spec); err != nil {
			return nil, err
		}
		c.open[spec] = s
	}
	inv, _ := s.(sink.Inventory)
	return inv, nil
}

// Close closes the sinks it opened.
func (c *SiteCopies) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, s := range c.open {
		errs = append(errs, s.Close(ctx))
	}
	c.open = nil
	return errors.Join(errs...)
}
