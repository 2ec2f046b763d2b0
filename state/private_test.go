package state

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStateFilePrivate: a state file, its WAL, shared memory and lock
// files are made 0600; a state file other users may read is refused
// unless opened with AllowReadable; an empty file is made private.
func TestStateFilePrivate(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := OpenExclusive(ctx, path, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginRun(ctx, Run{Mode: "baseline", Source: "http://a/", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", LockPath(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(p), perm)
		}
	}
	s.Close()

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if !Readable(path) {
		t.Error("Readable says no of a state file of mode 0644")
	}
	_, err = Open(ctx, path)
	if !errors.Is(err, ErrReadable) {
		t.Fatalf("Open of a state file of mode 0644: %v; want ErrReadable", err)
	}
	for _, want := range []string{"chmod 600", "--allow-readable-state", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if _, err := OpenExclusive(ctx, path, "test", 0); !errors.Is(err, ErrReadable) {
		t.Errorf("OpenExclusive: %v; want ErrReadable", err)
	}
	s, err = Open(ctx, path, AllowReadable())
	if err != nil {
		t.Fatalf("Open with AllowReadable: %v", err)
	}
	s.Close()

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi, _ := os.Stat(empty); fi.Mode().Perm() != 0o600 {
		t.Errorf("an empty file made a state store has mode %04o, want 0600", fi.Mode().Perm())
	}
}

// TestStatePathErrors: a state path whose directory is missing gets one
// line naming the path and what is wrong; so do a read-only file system
// and a permission refused.
func TestStatePathErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "state.db")
	_, err := Open(t.Context(), missing)
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Open(%s): %v; want one line saying its directory does not exist", missing, err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "/ro/state.db", Err: syscall.EROFS}, "read-only"},
		{&fs.PathError{Op: "open", Path: "/ro/state.db", Err: syscall.EACCES}, "permission denied"},
	} {
		got := fileError("/ro/state.db", tc.err)
		if !strings.Contains(got.Error(), tc.want) || !strings.Contains(got.Error(), "/ro/state.db") {
			t.Errorf("fileError(%v) = %v; want it to say %q", tc.err, got, tc.want)
		}
	}
}

// TestDamagedStateNoticed: a state file with a corrupt page, whose last
// user did not close it (its write-ahead log still there), is refused by
// OpenExclusive with ErrDamaged, and Check lists what is wrong; a sound
// one is ok.
func TestDamagedStateNoticed(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Resource
	for i := range 2000 {
		rs = append(rs, Resource{URI: fmt.Sprintf("http://a/%05d", i), Source: "http://a/", Length: 10, Type: "text/plain", Outcome: OutcomeWritten,
			Package: "http://a/p.zip", ETag: "", LastModified: ""})
	}
	if err := s.PutResources(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if problems, err := s.Check(ctx, false); err != nil || len(problems) != 0 {
		t.Fatalf("a sound file: %q, %v", problems, err)
	}
	s.Close()
	// Damage a page in the middle of the file, and leave a write-ahead
	// log behind, as a process killed would.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	junk := bytes.Repeat([]byte{0xA5}, 600)
	if _, err := f.WriteAt(junk, fi.Size()/2/4096*4096+20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(path+"-wal", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenExclusive(ctx, path, "test", 0)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "state check") {
		t.Fatalf("OpenExclusive of a damaged file: %v; want ErrDamaged", err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if problems, err := s.Check(ctx, false); err != nil || len(problems) == 0 {
		t.Errorf("Check of a damaged file: %q, %v", problems, err)
	}
}
