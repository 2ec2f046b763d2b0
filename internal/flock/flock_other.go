//go:build !unix

// Package flock takes advisory locks on open files where the system has
// flock(2); elsewhere it cannot, and says so.
package flock

import "os"

// Supported reports whether this system has flock.
const Supported = false

// TryLock takes no lock where flock is not available, and reports false:
// the file may be in use, for all it can tell.
func TryLock(*os.File) (bool, error) { return false, nil }
