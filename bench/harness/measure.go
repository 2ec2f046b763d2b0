package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Measure runs the benchmark of opts as the bench command does: with a
// sweep, once per dump of each number of resources in it (Sweep); else
// with rounds above 1 the median of that many rounds (Repeat); else once
// (Run). An empty opts.CacheDir is DefaultCacheDir; an empty opts.WorkDir
// is a temporary directory, removed when Measure returns.
func Measure(ctx context.Context, opts Options, rounds int, sweep []int) (*Result, error) {
	if opts.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		opts.CacheDir = dir
	}
	if opts.WorkDir == "" {
		work, err := os.MkdirTemp("", "rsharvest-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(work)
		opts.WorkDir = work
	}
	switch {
	case len(sweep) > 0:
		return Sweep(ctx, opts, sweep)
	case rounds > 1:
		return Repeat(ctx, opts, rounds)
	}
	return Run(ctx, opts)
}

// DefaultCacheDir is where dumps are cached when no directory is given:
// $RSHARVEST_CACHE, else ~/.cache/rsharvest/bench.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("RSHARVEST_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("bench: no cache directory (use --cache): %w", err)
	}
	return filepath.Join(d, "rsharvest", "bench"), nil
}

// WriteFiles writes the results as JSON to jsonPath and as an SVG chart
// to svgPath; an empty path is skipped.
func (r *Result) WriteFiles(jsonPath, svgPath string) error {
	if jsonPath != "" {
		if err := writeFileWith(jsonPath, r.WriteJSON); err != nil {
			return err
		}
	}
	if svgPath != "" {
		if err := writeFileWith(svgPath, r.WriteSVG); err != nil {
			return err
		}
	}
	return nil
}

// writeFileWith creates path and fills it with write.
func writeFileWith(path string, write func(w io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := write(out); err != nil {
		out.Close()
		return fmt.Errorf("bench: writing %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}
