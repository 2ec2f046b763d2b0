package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rsharvest/rsharvest/bench"
)

// genResultFile is written into a cached dump once it is complete.
const genResultFile = "bench-gen.json"

// CacheKey names the cache directory of a dump: its main parameters and a
// hash of the whole GenOptions (Dir and Logger excluded) and of the
// generator's package format (bench.PackageFormat), so that a dump written
// in an older layout is never reused.
func CacheKey(o bench.GenOptions) (string, error) {
	o.Dir, o.Logger = "", nil
	if o.Producer == bench.ProducerRsharvest {
		o.Producer = "" // the default: the same dump, the same key as before producers
	}
	b, err := json.Marshal(o)
	if err != nil {
		return "", fmt.Errorf("harness: hashing generator options: %w", err)
	}
	b = fmt.Appendf(b, "\nformat %d", bench.PackageFormat)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("r%d-s%d-%s", o.Resources, o.MeanSize, hex.EncodeToString(sum[:8])), nil
}

// Prepare returns the dump of o under cacheDir, generating it first when
// it is not there yet. Generation goes to a temporary directory renamed
// into place when done, so an interrupted one is never reused.
func Prepare(ctx context.Context, cacheDir string, o bench.GenOptions, log *slog.Logger) (Dump, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := CacheKey(o)
	if err != nil {
		return Dump{}, err
	}
	dir := filepath.Join(cacheDir, key)
	if d, err := readCached(dir); err == nil {
		log.InfoContext(ctx, "bench: reusing cached dump", "dir", dir)
		return d, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Dump{}, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return Dump{}, fmt.Errorf("harness: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, key+".tmp-")
	if err != nil {
		return Dump{}, fmt.Errorf("harness: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	log.InfoContext(ctx, "bench: generating dump", "dir", dir, "resources", o.Resources)
	o.Dir, o.Logger = tmp, nil
	gr, err := bench.Generate(ctx, o)
	if err != nil {
		return Dump{}, fmt.Errorf("harness: generating: %w", err)
	}
	b, err := json.Marshal(gr)
	if err != nil {
		return Dump{}, fmt.Errorf("harness: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, genResultFile), b, 0o644); err != nil {
		return Dump{}, fmt.Errorf("harness: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have finished the same dump first.
		if d, rerr := readCached(dir); rerr == nil {
			return d, nil
		}
		return Dump{}, fmt.Errorf("harness: %w", err)
	}
	return Dump{Dir: dir, Resources: gr.Resources, Packages: gr.Packages,
		PayloadBytes: gr.PayloadBytes, PackageBytes: gr.PackageBytes}, nil
}

// readCached reads a complete cached dump's summary.
func readCached(dir string) (Dump, error) {
	b, err := os.ReadFile(filepath.Join(dir, genResultFile))
	if err != nil {
		return Dump{}, fmt.Errorf("harness: cached dump: %w", err)
	}
	var gr bench.GenResult
	if err := json.Unmarshal(b, &gr); err != nil {
		return Dump{}, fmt.Errorf("harness: cached dump %s: %w", dir, err)
	}
	return Dump{Dir: dir, Cached: true, Resources: gr.Resources, Packages: gr.Packages,
		PayloadBytes: gr.PayloadBytes, PackageBytes: gr.PackageBytes}, nil
}

// packageFiles lists the dump's resource dump packages.
func packageFiles(d Dump) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(d.Dir, "packages", "*.zip"))
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("harness: no packages in %s", d.Dir)
	}
	return files, nil
}
