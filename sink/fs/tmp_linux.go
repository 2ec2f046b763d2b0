package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/rsharvest/rsharvest/internal/flock"
)

// tmpFiles creates the temporary files of a sink. On Linux it holds the
// temporary directory open and works on its descriptor with the system
// calls that os does not offer on an *os.File: a new file takes one
// openat (no path resolution from the root, and no netpoller registration,
// which a regular file refuses anyway), and its modification time is set
// through its own descriptor, before it is closed.
type tmpFiles struct {
	dir  *os.File // the temporary directory
	path string   // the temporary directory's path, for messages
}

// errTmpBusy is wrapped by openTmpFiles' error when another open file (a
// sink opening meanwhile, removing what it takes for an ended process's
// directory) holds the temporary directory's lock.
var errTmpBusy = errors.New("locked by another process")

// openTmpFiles opens the temporary directory rel of root and takes its
// lock (see lockDir), held until close.
func openTmpFiles(root *os.Root, sinkDir, rel string) (*tmpFiles, error) {
	d, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	if ok, err := lockDir(d); err != nil || !ok {
		d.Close()
		if err == nil {
			err = fmt.Errorf("temporary directory %s: %w", rel, errTmpBusy)
		}
		return nil, err
	}
	return &tmpFiles{dir: d, path: filepath.Join(sinkDir, filepath.FromSlash(rel))}, nil
}

// lockDir takes an exclusive flock on the open directory d without
// blocking: false means another process holds it (its sink is open). The
// operating system releases the lock when the holder closes d or dies.
func lockDir(d *os.File) (bool, error) { return flock.TryLock(d) }

// create creates the file name (one path element) in the temporary
// directory, failing when it exists. Like os.Root it never follows a
// symbolic link: O_CREAT|O_EXCL fails on one.
func (t *tmpFiles) create(name string) (*os.File, error) {
	rc, err := t.dir.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var openErr error
	err = rc.Control(func(dirfd uintptr) {
		for {
			fd, openErr = syscall.Openat(int(dirfd), name,
				syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, filePerm)
			if !errors.Is(openErr, syscall.EINTR) {
				return
			}
		}
	})
	if err == nil {
		err = openErr
	}
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: filepath.Join(t.path, name), Err: err}
	}
	return os.NewFile(uintptr(fd), filepath.Join(t.path, name)), nil
}

// closeFile closes f, the temporary file name, first setting its access and
// modification times to mtime unless that is zero.
func (t *tmpFiles) closeFile(f *os.File, name string, mtime time.Time) error {
	if !mtime.IsZero() {
		if err := futimes(f, mtime); err != nil {
			_ = f.Close()
			return &os.PathError{Op: "utimensat", Path: filepath.Join(t.path, name), Err: err}
		}
	}
	return f.Close()
}

// close releases the temporary directory.
func (t *tmpFiles) close() error { return t.dir.Close() }

// futimes sets the access and modification times of f to mtime with
// utimensat(fd, NULL, times, 0), which is what futimens(3) does; the
// syscall package has no futimens, and its Futimes goes through
// /proc/self/fd, which a container may not mount. The times are converted
// as os.Chtimes converts them.
func futimes(f *os.File, mtime time.Time) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(mtime.UnixNano()), syscall.NsecToTimespec(mtime.UnixNano())}
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		for {
			_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
			if errno != syscall.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
