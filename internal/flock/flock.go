//go:build unix

// Package flock takes advisory locks on open files (flock(2)): a lock is
// held by an open file description until it is closed, and the operating
// system releases it when its process dies, kill -9 included, so a crash
// never leaves one behind.
package flock

import (
	"errors"
	"os"
	"syscall"
)

// Supported reports whether this system has flock.
const Supported = true

// TryLock takes an exclusive lock on f without waiting: false means another
// open file description (another process, or another open of the file)
// holds it.
func TryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}
