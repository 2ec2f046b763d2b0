package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// danglingChildEnv names, in a child process of TestOpenDanglingSymlink,
// the dangling link to open and how ("open" or "exclusive").
const danglingChildEnv = "RSHARVEST_TEST_DANGLING"

// TestOpenDanglingSymlink: a state path that is a symbolic link to a
// file not yet made (state.db -> /data/rsharvest/state.db, before the first
// run) is either made or refused with an error, never a crash (creating
// it with O_CREATE|O_EXCL fails with EEXIST on any symbolic link: retried
// without end, the stack overflowed). The open runs in a child process
// (with a small stack limit, so that a crash comes quickly) for the test
// to report, not die.
func TestOpenDanglingSymlink(t *testing.T) {
	if spec := os.Getenv(danglingChildEnv); spec != "" {
		how, link, _ := strings.Cut(spec, ":")
		debug.SetMaxStack(16 << 20)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var s *Store
		var err error
		if how == "exclusive" {
			s, err = OpenExclusive(ctx, link, "test", 0)
		} else {
			s, err = Open(ctx, link)
		}
		if err == nil {
			s.Close()
		}
		fmt.Printf("CHILD-RESULT: %v\n", err)
		return
	}
	for _, how := range []string{"open", "exclusive"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			link := filepath.Join(dir, "state.db")
			if err := os.Symlink(filepath.Join(dir, "data", "state.db"), link); err != nil {
				t.Fatal("no symbolic links here:", err)
			}
			if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOpenDanglingSymlink$", "-test.count=1")
			cmd.Env = append(os.Environ(), danglingChildEnv+"="+how+":"+link)
			out, err := cmd.CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("CHILD-RESULT:")) {
				first, _, _ := strings.Cut(string(out), "\n\n")
				t.Fatalf("opening (%s) a symbolic link to a missing state file killed the process (%v): %s", how, err, first)
			}
		})
	}
}

// damageWithWAL fills the state file at path, damages a page in its
// middle and leaves a write-ahead log beside it, as a killed process
// would (as TestDamagedStateNoticed does).
func damageWithWAL(t *testing.T, path string) {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Resource
	for i := range 2000 {
		rs = append(rs, Resource{URI: fmt.Sprintf("http://a/%05d", i), Source: "http://a/", Length: 10, Type: "text/plain", Outcome: OutcomeWritten, Package: "http://a/p.zip"})
	}
	if err := s.PutResources(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 600), fi.Size()/2/4096*4096+20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(path+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestUncleanCloseThroughSymlink: a state file left by a killed
// process (its write-ahead log still there) is checked when the next run
// opens it (docs/safety.md), whatever path names it: SQLite resolves
// symbolic links and keeps the log beside the real file, and that is where
// it is looked for.
func TestUncleanCloseThroughSymlink(t *testing.T) {
	for _, tc := range []struct {
		name string
		link bool
	}{
		{"the file itself", false},
		{"a symbolic link to it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			real := filepath.Join(dir, "real.db")
			damageWithWAL(t, real)
			path := real
			if tc.link {
				path = filepath.Join(dir, "link.db")
				if err := os.Symlink(real, path); err != nil {
					t.Fatal("no symbolic links here:", err)
				}
			}
			s, err := OpenExclusive(t.Context(), path, "test", 0)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrDamaged) {
				t.Errorf("OpenExclusive(%s) of a damaged file left by a killed process: %v; want ErrDamaged", filepath.Base(path), err)
			}
		})
	}
}

// TestJournalFilesPrivateThroughSymlink: the write-ahead log of a
// state file made private after it was made (an older version made them
// 0644; the refusal tells the user to chmod 600 the file) follows it when
// the file is opened (privateFile), through a symbolic link too: SQLite's
// log is REAL-wal, not LINK-wal.
func TestJournalFilesPrivateThroughSymlink(t *testing.T) {
	for _, tc := range []struct {
		name string
		link bool
	}{
		{"the file itself", false},
		{"a symbolic link to it", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			real := filepath.Join(dir, "real.db")
			s, err := Open(ctx, real)
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, s)
			wal, err := os.ReadFile(real + "-wal") // a log with frames, as a killed run leaves it
			if err != nil || len(wal) == 0 {
				t.Fatalf("no log to copy: %d bytes, %v", len(wal), err)
			}
			s.Close()
			if err := os.WriteFile(real+"-wal", wal, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(real+"-wal", 0o644); err != nil {
				t.Fatal(err)
			}
			path := real
			if tc.link {
				path = filepath.Join(dir, "link.db")
				if err := os.Symlink(real, path); err != nil {
					t.Fatal("no symbolic links here:", err)
				}
			}
			s, err = Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fi, err := os.Stat(real + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("opened through %s, the state file's write-ahead log has mode %04o; want 0600", filepath.Base(path), perm)
			}
		})
	}
}

// TestOpenExclusiveDirectoryNoLock: OpenExclusive of a path that is
// a directory fails, and (as for every path that is not a state file)
// leaves no lock file beside it.
func TestOpenExclusiveDirectoryNoLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := OpenExclusive(t.Context(), path, "test", 0)
	if err == nil {
		s.Close()
		t.Fatal("OpenExclusive of a directory succeeded")
	}
	if _, serr := os.Stat(LockPath(path)); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("OpenExclusive of a directory (%v) left a lock file beside it: %v", err, serr)
	}
}
