package state

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rsharvest/rsharvest/errclass"
)

// ErrReadable is wrapped by the error of Open for a state file that other
// users may read: it holds the registry's sink credentials and header
// values. AllowReadable opens it anyway.
var ErrReadable = errors.New("readable by other users")

// Option changes how Open and OpenExclusive open a state file.
type Option func(*options)

type options struct {
	allowReadable bool
}

// AllowReadable opens a state file whose permissions let other users read
// it (--allow-readable-state); without it Open refuses one.
func AllowReadable() Option { return func(o *options) { o.allowReadable = true } }

func optionsOf(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Readable reports whether the file at path is a state store that grants
// other users (its group, or everyone) read access.
func Readable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm()&0o044 != 0 && isStateFile(path)
}

// privateFile makes the state file at path private before SQLite opens
// it: a missing file is created with mode 0600 (SQLite gives its WAL and
// shared-memory files the mode of the database file), an empty one is made
// 0600, and a database that other users may read is refused unless allow.
// Where the directory is missing or the file system read-only, the error
// says so in a line naming the path.
func privateFile(path string, allow bool) error {
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		// SQLite follows the link, and keeps its journal files beside
		// the file it names: so does this.
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return errclass.Fatalf("state: %s is a symbolic link to a file that cannot be reached (%v): create the file it names, or name a file", path, err)
		}
		path = real
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case errors.Is(err, fs.ErrExist):
			return privateFile(path, allow) // made meanwhile by another process
		case err != nil:
			return fileError(path, err)
		}
		return f.Close()
	}
	if err != nil {
		return fileError(path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil // SQLite says what it is not
	}
	if fi.Size() == 0 && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fileError(path, err)
		}
		return nil
	}
	if fi.Mode().Perm()&0o044 != 0 && !allow && isStateFile(path) {
		return readableError(path, fi.Mode().Perm())
	}
	if fi.Mode().Perm()&0o077 == 0 {
		// The journal files of a file made private after they were
		// made follow it.
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if j, err := os.Stat(path + suffix); err == nil && j.Mode().Perm()&0o077 != 0 {
				os.Chmod(path+suffix, 0o600)
			}
		}
	}
	return nil
}

// readableError is the refusal of the state store at path, which other
// users may read (mode perm).
func readableError(path string, perm fs.FileMode) error {
	return errclass.Fatalf("state: %s: %w (mode %04o): it holds the registry's credentials; make it private (chmod 600 %s), or open it anyway with --allow-readable-state",
		path, ErrReadable, perm, path)
}

// isStateFile reports whether the file at path begins as an SQLite
// database whose header carries the state store's application id.
func isStateFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 72)
	_, err = io.ReadFull(f, head)
	return err == nil && string(head[:16]) == "SQLite format 3\x00" && binary.BigEndian.Uint32(head[68:72]) == applicationID
}

// fileError words a failure to reach or create the state file at path in
// one line: its directory missing, a read-only file system, no permission.
func fileError(path string, err error) error {
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(dir); derr != nil {
			return errclass.Fatalf("state: %s: the directory %s does not exist (create it, or give --state another path): %w", path, dir, fs.ErrNotExist)
		}
	case errors.Is(err, syscall.EROFS):
		return errclass.Fatalf("state: %s: the file system is read-only (give --state a path on a writable one): %w", path, syscall.EROFS)
	case errors.Is(err, fs.ErrPermission):
		return errclass.Fatalf("state: %s: permission denied (the file, or its directory %s, is not writable by this user): %w", path, dir, fs.ErrPermission)
	}
	return errclass.Fatalf("state: %s: %w", path, err)
}
