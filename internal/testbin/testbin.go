// Package testbin finds the binaries of the third-party servers the
// integration tests run against (MinIO, ZincSearch, Mailpit), which
// scripts/servers.sh builds from the module proxy and caches.
package testbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Path returns the path of server name at version: $env when it is set,
// else the binary scripts/servers.sh caches in
// ${RSHARVEST_CACHE:-~/.cache/rsharvest} as NAME-VERSION, running the
// script (found upwards from the working directory) to build it when it
// is absent — minutes, once.
func Path(ctx context.Context, env, name, version string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", env, err)
		}
		return p, nil
	}
	cache := os.Getenv("RSHARVEST_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "rsharvest")
	}
	bin := filepath.Join(cache, name+"-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "scripts", "servers.sh")
	fmt.Fprintf(os.Stderr, "%s is absent; building it with %s %s (minutes, once)\n", bin, script, name)
	cmd := exec.CommandContext(ctx, "bash", script, name)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", script, name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	bin = lines[len(lines)-1]
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s %s printed %q: %w", script, name, bin, err)
	}
	return bin, nil
}

// Root returns the module's root: the nearest directory upwards from the
// working directory (for a test, its package's) that holds
// scripts/servers.sh.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "servers.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no scripts/servers.sh above the working directory (run from within the rsharvest module)")
		}
		dir = parent
	}
}
