package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
)

func TestLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	first, err := Lock(ctx, path, "rsharvest sync", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A second lock (another open file description, as another process
	// has) fails at once, naming the holder.
	_, err = Lock(ctx, path, "rsharvest baseline", 0)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || !errclass.IsFatal(err) {
		t.Fatalf("second lock: %v, want a fatal *LockedError", err)
	}
	host, _ := os.Hostname()
	if le.Holder.PID != os.Getpid() || le.Holder.Host != host || le.Holder.Command != "rsharvest sync" || time.Since(le.Holder.Started) > time.Minute {
		t.Errorf("holder %+v", le.Holder)
	}
	for _, want := range []string{path, "pid ", host, "rsharvest sync", "since "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}

	// A wait that ends before the lock is released fails the same way; one
	// cancelled fails with the context's error.
	if _, err := Lock(ctx, path, "x", 300*time.Millisecond); !errors.Is(err, ErrLocked) {
		t.Errorf("bounded wait: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Lock(cctx, path, "x", time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}

	// A waiting lock gets it once the holder releases it.
	got := make(chan error, 1)
	go func() {
		l, err := Lock(ctx, path, "waiter", time.Minute)
		if err == nil {
			defer l.Unlock()
			_, err = Lock(ctx, path, "third", 0)
			if le := (*LockedError)(nil); errors.As(err, &le) && le.Holder.Command == "waiter" {
				err = nil
			}
		}
		got <- err
	}()
	time.Sleep(2 * lockPoll)
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if err := first.Unlock(); err != nil {
		t.Errorf("second Unlock: %v", err)
	}
}

// TestLockThroughSymlink: a run naming the state file through a symbolic
// link takes the same lock as one naming the file itself.
func TestLockThroughSymlink(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	l, err := Lock(ctx, path, "rsharvest sync", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if _, err := Lock(ctx, link, "rsharvest sync", 0); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock through a symbolic link: %v, want ErrLocked", err)
	}
	if LockPath(link) != LockPath(path) {
		t.Errorf("LockPath(%s) = %s, LockPath(%s) = %s", link, LockPath(link), path, LockPath(path))
	}
}

// TestTwoWorkersOfOneHostAndPid: two daemons whose host name and pid are
// the same (containers) hold a worker lease each, and are two workers.
func TestTwoWorkersOfOneHostAndPid(t *testing.T) {
	ctx := t.Context()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, b := WorkerLease(), WorkerLease()
	if a == b {
		t.Fatalf("WorkerLease gave %q twice", a)
	}
	for _, k := range []string{a, b} {
		l, err := st.Lease(ctx, k, "rsharvest daemon", 0)
		if err != nil {
			t.Fatalf("worker lease %q: %v", k, err)
		}
		defer l.Release()
	}
	if n, err := st.Workers(ctx); err != nil || n != 2 {
		t.Errorf("Workers = %d, %v; want 2", n, err)
	}
}
