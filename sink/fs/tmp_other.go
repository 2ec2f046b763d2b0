//go:build !linux

package fs

import (
	"errors"
	"math"
	"os"
	"time"
)

// tmpFiles creates the temporary files of a sink through a root opened on
// the temporary directory, so that creating one resolves no path.
type tmpFiles struct {
	root *os.Root // the temporary directory
}

// errTmpBusy would report a temporary directory locked by another process;
// without flock none is locked, so openTmpFiles never returns it.
var errTmpBusy = errors.New("locked by another process")

// openTmpFiles opens the temporary directory rel of root.
func openTmpFiles(root *os.Root, _, rel string) (*tmpFiles, error) {
	r, err := root.OpenRoot(rel)
	if err != nil {
		return nil, err
	}
	return &tmpFiles{root: r}, nil
}

// tmpFile is a temporary file.
type tmpFile = os.File

// create creates the file name (one path element) in the temporary
// directory, failing when it exists.
func (t *tmpFiles) create(name string) (*tmpFile, error) {
	return t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
}

// closeFile closes f, the temporary file name, and then sets its access
// and modification times to mtime unless that is zero.
func (t *tmpFiles) closeFile(f *tmpFile, name string, mtime time.Time) error {
	if err := f.Close(); err != nil || mtime.IsZero() {
		return err
	}
	// os.Chtimes goes through UnixNano: keep within what it represents.
	mtime = min(max(mtime, time.Unix(0, math.MinInt64)), time.Unix(0, math.MaxInt64))
	return t.root.Chtimes(name, mtime, mtime)
}

// openNonblock is 0: a FIFO planted at a file's path makes Get wait for
// a writer on this system.
const openNonblock = 0

// close releases the temporary directory.
func (t *tmpFiles) close() error { return t.root.Close() }

// rename moves the temporary file tmp (its path below root) to rel, a file
// path below root, replacing what is there (os.Root.Rename).
func (t *tmpFiles) rename(root *os.Root, tmp, rel string) error { return root.Rename(tmp, rel) }

// forgetAll has nothing to forget on this system.
func (t *tmpFiles) forgetAll() {}

// lockDir cannot tell, without flock, whether another process uses a
// temporary directory: it reports every one as in use, so none is removed.
func lockDir(*os.File) (bool, error) { return false, nil }
