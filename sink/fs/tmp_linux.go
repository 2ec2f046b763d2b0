package fs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rsharvest/rsharvest/internal/flock"
)

// tmpFiles creates the temporary files of a sink. On Linux it holds the
// temporary directory open and works on its descriptor with the system
// calls that os does not offer on an *os.File: a new file takes one
// openat (no path resolution from the root, and no netpoller registration,
// which a regular file refuses anyway), and its modification time is set
// through its own descriptor, before it is closed.
//
// It also keeps handles on the directories files are renamed into (at most
// maxDirHandles), opened through the root, so that moving a file into
// place is one renameat from descriptor to descriptor instead of a walk
// of both paths from the root, component by component.
type tmpFiles struct {
	dir  *os.File // the temporary directory
	top  *os.File // the root directory, to look a held directory up from
	path string   // the temporary directory's path, for messages

	mu   sync.Mutex
	dirs map[string]dirHandle // destination directories by path below the root ("." for the root)
}

// dirHandle is a held destination directory, with its identity when
// opened: a handle is used only while its path still leads to it (a
// directory moved away, within the root or out of it, is not written).
type dirHandle struct {
	f        *os.File
	dev, ino uint64
}

// maxDirHandles bounds the destination directory handles kept open.
const maxDirHandles = 128

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
	top, err := root.Open(".")
	if err != nil {
		d.Close()
		return nil, err
	}
	return &tmpFiles{dir: d, top: top, path: filepath.Join(sinkDir, filepath.FromSlash(rel)), dirs: map[string]dirHandle{}}, nil
}

// rename moves the temporary file tmp (its path below root) to rel, a
// file path below root, replacing what is there: a renameat between the
// temporary directory's descriptor and a handle on rel's directory, kept
// for the next file. Like os.Root.Rename it follows no symbolic link: the
// handle was opened through root, and renameat does not follow the last
// element. When rel's directory is missing (or was removed since its
// handle was opened) the error satisfies errors.Is(err, fs.ErrNotExist).
func (t *tmpFiles) rename(root *os.Root, tmp, rel string) error {
	dir := path.Dir(rel)
	d, err := t.dirHandle(root, dir)
	if err != nil {
		return err
	}
	err = renameat(t.dir, path.Base(tmp), d, path.Base(rel))
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, errHandleClosed) {
		t.forget(dir, d) // gone, or closed by an eviction meanwhile: opened again next time
		err = syscall.ENOENT
	}
	if err != nil {
		return &os.LinkError{Op: "renameat", Old: filepath.Join(t.path, path.Base(tmp)), New: rel, Err: err}
	}
	return nil
}

// dirHandle returns the handle on dir, opening it through root when it is
// not held, or no longer what dir leads to (one fstatat from the root);
// past maxDirHandles another is closed first.
func (t *tmpFiles) dirHandle(root *os.Root, dir string) (*os.File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.dirs[dir]; ok {
		if dev, ino, err := t.identity(dir); err == nil && dev == h.dev && ino == h.ino {
			return h.f, nil
		}
		_ = h.f.Close() // moved, or replaced: opened again through root
		delete(t.dirs, dir)
	}
	d, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	st, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		d.Close()
		return nil, fmt.Errorf("%s: no device and inode", dir)
	}
	for k, old := range t.dirs {
		if len(t.dirs) < maxDirHandles {
			break
		}
		_ = old.f.Close() // a rename using it holds its descriptor until done
		delete(t.dirs, k)
	}
	t.dirs[dir] = dirHandle{f: d, dev: uint64(sys.Dev), ino: sys.Ino}
	return d, nil
}

// identity returns the device and inode of what dir, below the root,
// leads to now.
func (t *tmpFiles) identity(dir string) (dev, ino uint64, err error) {
	rc, err := t.top.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var st unix.Stat_t
	var callErr error
	err = rc.Control(func(fd uintptr) {
		for {
			callErr = unix.Fstatat(int(fd), dir, &st, 0)
			if !errors.Is(callErr, unix.EINTR) {
				return
			}
		}
	})
	if err = cmp.Or(err, callErr); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), st.Ino, nil
}

// forget closes the handle d on dir, if it is still the one held.
func (t *tmpFiles) forget(dir string, d *os.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.dirs[dir]; ok && h.f == d {
		_ = d.Close()
		delete(t.dirs, dir)
	}
}

// errHandleClosed reports a directory handle closed (evicted) before a
// rename could use it.
var errHandleClosed = errors.New("directory handle closed")

// forgetAll closes every destination directory handle: directories were
// removed (a Delete pruned them).
func (t *tmpFiles) forgetAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.dirs {
		_ = h.f.Close()
		delete(t.dirs, k)
	}
}

// renameat renames name in the directory from to base in the directory to.
// Both descriptors are held (SyscallConn.Control) for the call, so that a
// concurrent Close waits for it instead of freeing a descriptor in use; a
// handle closed before fails with errHandleClosed.
func renameat(from *os.File, name string, to *os.File, base string) error {
	frc, err := from.SyscallConn()
	if err != nil {
		return err
	}
	trc, err := to.SyscallConn()
	if err != nil {
		return err
	}
	var callErr error
	err = frc.Control(func(ffd uintptr) {
		err := trc.Control(func(tfd uintptr) {
			for {
				callErr = syscall.Renameat(int(ffd), name, int(tfd), base)
				if !errors.Is(callErr, syscall.EINTR) {
					return
				}
			}
		})
		if err != nil {
			callErr = fmt.Errorf("%w: %w", errHandleClosed, err)
		}
	})
	if err != nil {
		return err
	}
	return callErr
}

// openNonblock opens what may be a FIFO planted at a file's path without
// waiting for a writer (a regular file reads as without it).
const openNonblock = syscall.O_NONBLOCK

// lockDir takes an exclusive flock on the open directory d without
// blocking: false means another process holds it (its sink is open). The
// operating system releases the lock when the holder closes d or dies.
func lockDir(d *os.File) (bool, error) { return flock.TryLock(d) }

// tmpFile is a temporary file written through its descriptor alone. It
// is not an *os.File, whose creation asks the descriptor's flags (an
// fcntl) and registers a cleanup: a file written once, by one goroutine,
// and closed needs neither.
type tmpFile struct {
	fd   int
	name string // for messages
}

// Write writes all of p, or fails.
func (f *tmpFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Write(f.fd, p[n:])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		case m == 0:
			return n, &os.PathError{Op: "write", Path: f.name, Err: io.ErrShortWrite}
		}
		n += m
	}
	return n, nil
}

// Sync commits the file's content to stable storage (fsync).
func (f *tmpFile) Sync() error {
	for {
		err := syscall.Fsync(f.fd)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fsync", Path: f.name, Err: err}
		}
		return nil
	}
}

// Close closes the descriptor; calling it again is an error.
func (f *tmpFile) Close() error {
	if f.fd < 0 {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	err := syscall.Close(f.fd) // not retried on EINTR: Linux closes the descriptor anyway
	f.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// create creates the file name (one path element) in the temporary
// directory, failing when it exists. Like os.Root it never follows a
// symbolic link: O_CREAT|O_EXCL fails on one.
func (t *tmpFiles) create(name string) (*tmpFile, error) {
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
	return &tmpFile{fd: fd, name: filepath.Join(t.path, name)}, nil
}

// closeFile closes f, the temporary file name, first setting its access and
// modification times to mtime unless that is zero.
func (t *tmpFiles) closeFile(f *tmpFile, name string, mtime time.Time) error {
	if !mtime.IsZero() {
		if err := futimes(f.fd, mtime); err != nil {
			_ = f.Close()
			return &os.PathError{Op: "utimensat", Path: filepath.Join(t.path, name), Err: err}
		}
	}
	return f.Close()
}

// close releases the temporary directory and the directory handles.
func (t *tmpFiles) close() error {
	t.forgetAll()
	return errors.Join(t.top.Close(), t.dir.Close())
}

// futimes sets the access and modification times of the open file fd to
// mtime with utimensat(fd, NULL, times, 0), which is what futimens(3)
// does; the syscall package has no futimens, and its Futimes goes through
// /proc/self/fd, which a container may not mount. The time is given in
// seconds and nanoseconds, so that one past 2262 (beyond UnixNano) is set
// as it is, or as the latest the file system keeps.
func futimes(fd int, mtime time.Time) error {
	at := syscall.Timespec{Sec: mtime.Unix(), Nsec: int64(mtime.Nanosecond())}
	ts := [2]syscall.Timespec{at, at}
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		switch errno {
		case syscall.EINTR:
			continue
		case 0:
			return nil
		default:
			return errno
		}
	}
}
