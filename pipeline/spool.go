package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
