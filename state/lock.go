package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/flock"
)

// ErrLocked is wrapped by the error of Lock when another run holds the
// state file.
var ErrLocked = errors.New("state file in use")

// Holder describes the run holding a state file's lock, as written in the
// lock file for the next run to read.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	Command string    `json:"command,omitempty"`
}

// LockedError reports that another run holds the state file at Path.
type LockedError struct {
	Path   string
	Holder Holder // zero when the holder wrote nothing readable yet
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("state file %s is in use by %s", e.Path, e.Holder)
}

// String names the holder for messages: "pid 12 on host h since T
// (command)", or "another run" when nothing readable was recorded.
func (h Holder) String() string {
	if h.PID == 0 {
		return "another run"
	}
	s := fmt.Sprintf("pid %d on host %s since %s", h.PID, h.Host, h.Started.UTC().Format(time.RFC3339))
	if h.Command != "" {
		s += " (" + h.Command + ")"
	}
	return s
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// FileLock is an exclusive lock on a state file, held by this process
// until Unlock (or its exit: the operating system releases it when the
// process dies, kill -9 included, so a crash never leaves it stale).
type FileLock struct {
	f *os.File
}

// LockPath is the lock file of the state file at path: FILE.lock beside
// the file itself, symbolic links resolved, so that runs naming one state
// file by different paths share one lock.
func LockPath(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path + ".lock"
}

// lockPoll is how often a waiting Lock tries again.
const lockPoll = 200 * time.Millisecond

// Lock takes the exclusive lock of the state file at path, for one run. It
// is an advisory lock (flock) on the file LockPath(path), in which the
// holder is recorded. When another process holds it, Lock fails at once
// with a *LockedError naming that holder — or, with wait above 0, tries
// again until it gets the lock, wait has passed (then the same error), or
// ctx ends. The error is fatal (errclass); the caller reports it as a
// usage problem. command says what the run is, for the next one to read.
func Lock(ctx context.Context, path, command string, wait time.Duration) (*FileLock, error) {
	f, err := os.OpenFile(LockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fileError(LockPath(path), err)
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		f.Chmod(0o600) // made by an older version
	}
	deadline := time.Now().Add(wait)
	for {
		ok, err := flock.TryLock(f)
		if !flock.Supported {
			ok, err = true, nil // runs on one state file are not kept apart here
		}
		if err != nil {
			f.Close()
			return nil, errclass.Fatalf("state: lock %s: %w", path, err)
		}
		if ok {
			break
		}
		if wait <= 0 || !time.Now().Before(deadline) {
			h := readHolder(f)
			f.Close()
			return nil, errclass.NewFatal(&LockedError{Path: path, Holder: h})
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, errclass.Fatalf("state: waiting for the lock of %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC(), Command: command})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
		if err != nil {
			f.Close()
			return nil, errclass.Fatalf("state: lock %s: %w", path, err)
		}
	}
	return &FileLock{f: f}, nil
}

// readHolder reads the holder recorded in an open lock file.
func readHolder(f *os.File) Holder {
	var h Holder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 4096))
	if err == nil {
		_ = json.Unmarshal([]byte(strings.TrimSpace(string(b))), &h)
	}
	return h
}

// Unlock releases the lock. The lock file stays, its contents stale until
// the next run overwrites them. Calling it again is a no-op.
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the lock
	l.f = nil
	return err
}
