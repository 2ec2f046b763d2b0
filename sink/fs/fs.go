package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
)

var (
	_ sink.Sink      = (*FS)(nil)
	_ sink.Inventory = (*FS)(nil)
	_ sink.Limiter   = (*FS)(nil)
	_ sink.Opener    = Open
)

const (
	copyBufferSize = 256 << 10
	// tmpAttempts bounds the attempts to create and lock the sink's own
	// temporary directory, which another sink opening at the same moment
	// may remove before it is locked (see resetTmp).
	tmpAttempts = 10
	// commitAttempts bounds the MkdirAll+Rename attempts of one Put: a
	// concurrent Delete may prune the file's directory between the two.
	commitAttempts = 4
	dirPerm        = 0o755
	filePerm       = 0o644
)

// Options configure an FS. The zero value is ready to use.
type Options struct {
	// Fsync syncs each file before it is renamed into place and its
	// directory after (with the parent of each directory created for it,
	// and after a Delete the directory that held the file), so committed
	// files and deletes survive a power loss. Without it
	// (the default) a commit is still atomic against process crashes, at
	// several times the speed.
	Fsync bool
	// Concurrency is the number of writes the sink takes at once (see
	// sink.Limiter); 0 means 2*GOMAXPROCS.
	Concurrency int
	// Logger receives the sink's warnings and notes; nil discards them.
	Logger *slog.Logger
	// Shared declares the directory on storage several machines mount
	// (NFS and the like), where the harvests of one registry run on any
	// of them (see sink.Local): each process's temporary directory is
	// named by its host too and held by its lock (flock, which such file
	// systems carry to the server), so that a sink opening on one machine
	// never removes the files of a process alive on another; a file is
	// still written beside its place and renamed into it, atomic on the
	// shared file system as on a local one.
	Shared bool
	// Layout is the directory's layout: LayoutFiles (the default, also
	// when empty) or LayoutPacked, which Open opens as a Packed.
	Layout Layout
	// MaxPacked bounds one body of the packed layout, which holds it in
	// memory until its batch is written; 0 means DefaultMaxPacked.
	MaxPacked int64
}

// FS is the filesystem sink: it holds each resource as a file under one
// directory, laid out as the package documentation describes. Its methods
// are safe for concurrent use. Within one process, concurrent operations on
// one URI take effect in some order; more than one process on one directory
// is not supported.
type FS struct {
	dir    string // absolute, cleaned
	root   *os.Root
	tmp    *tmpFiles // creates files in tmpRel
	tmpRel string    // this sink's own temporary directory, under tmpDir
	pid    string    // this process's id, which starts temporary names
	opts   Options
	log    *slog.Logger
	bufs   sync.Pool // *[]byte of copyBufferSize
	seq    atomic.Uint64
	closed atomic.Bool
	// pruning is held for reading while a Put creates directories and
	// renames into them, and for writing while a Delete prunes empty
	// directories, so that a prune never removes a directory between its
	// creation and the rename that fills it.
	pruning sync.RWMutex
	// fresh holds, with Options.Fsync, the directories this sink created
	// whose entries in their parents are not yet synced: a file renamed
	// into a new directory survives a power loss only with them. A
	// directory is marked before it is created, so that a Put renaming
	// into it meanwhile syncs its parent too.
	freshMu sync.Mutex
	fresh   map[string]struct{}
	// dirSynced, when not nil, is told of each directory synced (tests).
	dirSynced func(dir string)
}

// New opens the sink rooted at dir, creating dir (and its parents) when it
// does not exist. It removes temporary files left by an earlier process
// and checks that dir is writable by creating and removing one. Any failure
// is a fatal error.
func New(dir string, opts Options) (*FS, error) {
	if dir == "" {
		return nil, errclass.Fatalf("fs sink: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errclass.Fatalf("fs sink %q: %w", dir, err)
	}
	if opts.Concurrency < 0 {
		return nil, errclass.Fatalf("fs sink %q: negative concurrency %d", dir, opts.Concurrency)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 2 * runtime.GOMAXPROCS(0)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Layout != "" && opts.Layout != LayoutFiles {
		return nil, errclass.Fatalf("fs sink %q: layout %q: New opens the file layout (NewPacked the packed one)", dir, opts.Layout)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, errclass.Fatalf("fs sink: %w", err)
	}
	if _, err := os.Lstat(filepath.Join(abs, PackedFile)); err == nil {
		return nil, errclass.Fatalf("fs sink %s: the directory holds a mirror in the packed layout (%s): open it with layout=packed", abs, PackedFile)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, errclass.Fatalf("fs sink: %w", err)
	}
	pid := strconv.Itoa(os.Getpid())
	if opts.Shared {
		host, _ := os.Hostname()
		pid = tmpSafe(host) + "-" + pid
	}
	s := &FS{dir: abs, root: root, pid: pid, opts: opts, log: logger.With("sink", "fs:"+abs)}
	s.bufs.New = func() any {
		b := make([]byte, copyBufferSize)
		return &b
	}
	if err := s.resetTmp(); err != nil {
		if s.tmp != nil {
			_ = s.tmp.close()
		}
		_ = root.Close()
		return nil, err
	}
	if err := s.mark(); err != nil {
		_ = s.tmp.close()
		_ = root.Close()
		return nil, err
	}
	return s, nil
}

// mark makes the sink's mark (tmpDir/sinkMark), when it is not there: the
// Walk of a sink whose directory holds this one skips it.
func (s *FS) mark() error {
	if err := s.root.Mkdir(tmpDir+"/"+sinkMark, 0o700); err != nil && !errors.Is(err, iofs.ErrExist) {
		return errclass.Fatalf("fs sink %s: making its mark: %w", s.dir, err)
	}
	return nil
}

// tmpSafe is a host name as a piece of a temporary name: letters, digits,
// '.' and '-' kept, anything else '_'.
func tmpSafe(host string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, host)
}

// resetTmp removes what ended processes left in the temporary directory
// tmpDir, creates this sink's own directory in it (locked while the sink is
// open, so that no other process removes it), opens it as s.tmp and proves
// it writable.
func (s *FS) resetTmp() error {
	if err := s.root.Mkdir(tmpDir, 0o700); err != nil && !errors.Is(err, iofs.ErrExist) {
		return errclass.Fatalf("fs sink %s: %w", s.dir, err)
	}
	if err := s.removeStaleTmp(); err != nil {
		return errclass.Fatalf("fs sink %s: removing stale temporary files: %w", s.dir, err)
	}
	for attempt := 1; ; attempt++ {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		rel := tmpDir + "/" + s.pid + "-" + hex.EncodeToString(rnd[:])
		if err := s.root.Mkdir(rel, 0o700); err != nil {
			return errclass.Fatalf("fs sink %s: %w", s.dir, err)
		}
		tmp, err := openTmpFiles(s.root, s.dir, rel)
		if err == nil {
			// Locked; but the directory may have gone before that.
			if _, err = s.root.Stat(rel); err == nil {
				s.tmp, s.tmpRel = tmp, rel
				break
			}
			_ = tmp.close()
		}
		// Another sink opening on this directory may have taken the new,
		// not yet locked, directory for an ended process's: it removed it
		// (gone), or holds its lock while removing it (busy). Then take
		// another name.
		if attempt == tmpAttempts || !(isNotExist(err) || errors.Is(err, errTmpBusy)) {
			return errclass.Fatalf("fs sink %s: %w", s.dir, err)
		}
	}
	name, f, err := s.createTemp()
	if err == nil {
		_, err = f.Write([]byte("rsharvest write check\n"))
		err = errors.Join(err, f.Close(), s.root.Remove(name))
	}
	if err != nil {
		return errclass.Fatalf("fs sink %s: directory is not writable: %w", s.dir, err)
	}
	return nil
}

// removeStaleTmp removes, from the temporary directory tmpDir, the
// directories of processes that have ended — their lock is free — and the
// files an earlier version of rsharvest wrote there directly. The directory
// of a live process, whose sink is open, is left alone.
func (s *FS) removeStaleTmp() error {
	entries, err := iofs.ReadDir(s.root.FS(), tmpDir)
	if err != nil {
		return err
	}
	removed, live := 0, 0
	for _, e := range entries {
		rel := tmpDir + "/" + e.Name()
		if e.Name() == sinkMark {
			continue
		}
		if !e.IsDir() {
			if err := s.root.Remove(rel); err != nil && !isNotExist(err) {
				return err
			}
			removed++
			continue
		}
		d, err := s.root.Open(rel)
		if isNotExist(err) {
			continue // another process removed it meanwhile
		}
		if err != nil {
			return err
		}
		free, err := lockDir(d)
		if err == nil && free {
			// Removed while locked: no process can start using it.
			err = s.root.RemoveAll(rel)
			removed++
		} else if err == nil {
			live++
		}
		_ = d.Close()
		if err != nil {
			return err
		}
	}
	if removed > 0 {
		s.log.Info("removed temporary files left by ended runs", "count", removed)
	}
	if live > 0 {
		s.log.Debug("temporary files of running processes left alone", "count", live)
	}
	return nil
}

// Open is the sink.Opener for "fs:DIR". The argument is DIR, optionally
// followed by "?" and URL-style options: "fsync=1" (or any strconv.ParseBool
// value) sets Options.Fsync, "shared=1" Options.Shared, "concurrency=N"
// Options.Concurrency, "layout=packed" (or "files") Options.Layout and
// "maxpacked=BYTES" Options.MaxPacked; with the packed layout the sink is
// a Packed. DIR therefore cannot contain "?". Errors are fatal.
func Open(ctx context.Context, arg string) (sink.Sink, error) {
	if err := ctx.Err(); err != nil {
		return nil, errclass.Fatalf("fs sink: %w", err)
	}
	dir, query, _ := strings.Cut(arg, "?")
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil, errclass.Fatalf("fs sink %q: options: %w", arg, err)
	}
	var opts Options
	for key, vals := range values {
		val := vals[len(vals)-1]
		switch key {
		case "fsync":
			if opts.Fsync, err = strconv.ParseBool(val); err != nil {
				return nil, errclass.Fatalf("fs sink %q: fsync: %w", arg, err)
			}
		case "shared":
			if opts.Shared, err = strconv.ParseBool(val); err != nil {
				return nil, errclass.Fatalf("fs sink %q: shared: %w", arg, err)
			}
		case "concurrency":
			if opts.Concurrency, err = strconv.Atoi(val); err != nil || opts.Concurrency < 1 {
				return nil, errclass.Fatalf("fs sink %q: concurrency %q: want a positive integer", arg, val)
			}
		case "layout":
			if opts.Layout = Layout(val); opts.Layout != LayoutFiles && opts.Layout != LayoutPacked {
				return nil, errclass.Fatalf("fs sink %q: layout %q: want %s or %s", arg, val, LayoutFiles, LayoutPacked)
			}
		case "maxpacked":
			if opts.MaxPacked, err = strconv.ParseInt(val, 10, 64); err != nil || opts.MaxPacked < 1 || opts.MaxPacked > MaxMaxPacked {
				return nil, errclass.Fatalf("fs sink %q: maxpacked %q: want a number of bytes from 1 to %d", arg, val, int64(MaxMaxPacked))
			}
		default:
			return nil, errclass.Fatalf("fs sink %q: unknown option %q (want fsync, shared, concurrency, layout, maxpacked)", arg, key)
		}
	}
	if opts.Layout == LayoutPacked {
		return NewPacked(ctx, dir, opts)
	}
	return New(dir, opts)
}

// Local reports whether the directory is this machine's alone: it is
// unless Options.Shared declares it shared.
func (s *FS) Local() bool { return !s.opts.Shared }

// Concurrency returns Options.Concurrency (by default 2*GOMAXPROCS).
func (s *FS) Concurrency() int { return s.opts.Concurrency }

// Dir returns the sink's directory as an absolute path.
func (s *FS) Dir() string { return s.dir }

// Path returns the file that uri maps to, whether or not the sink holds it.
func (s *FS) Path(uri string) string {
	return filepath.Join(s.dir, filepath.FromSlash(Encode(uri)))
}

// Put writes body as the file of r.URI, replacing any earlier one. It reads
// body to io.EOF into a temporary file and then renames that into place, so
// the new state appears whole or not at all: after a body error, a ctx
// that ends, or a filesystem error, the previous file (or none) is left and
// the temporary file removed. A body error is returned wrapped; a ctx error
// is retryable; a filesystem error is fatal, or permanent when only this
// URI's name is at fault (too long or rejected by the filesystem).
func (s *FS) Put(ctx context.Context, r *sink.Resource, body io.Reader) (err error) {
	if r == nil {
		return errclass.Permanentf("fs: put: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("fs: put %s: %w", short(r.URI), err)
	}
	tmp, f, err := s.createTemp()
	if err != nil {
		return s.fsError("put", r.URI, err)
	}
	defer func() {
		if err != nil {
			if f != nil {
				_ = f.Close()
			}
			if rmErr := s.root.Remove(tmp); rmErr != nil && !errors.Is(rmErr, iofs.ErrNotExist) {
				s.log.Warn("cannot remove temporary file", "file", tmp, "err", rmErr)
			}
		}
	}()

	src := &sink.ContextReader{Ctx: ctx, R: body}
	bufp := s.bufs.Get().(*[]byte)
	_, err = io.CopyBuffer(writerOnly{f}, src, *bufp)
	s.bufs.Put(bufp)
	if berr := src.BodyError(err, "fs: put "+short(r.URI)); berr != nil {
		return berr
	}
	if err != nil {
		return s.fsError("put", r.URI, err)
	}
	if s.opts.Fsync {
		if err = f.Sync(); err != nil {
			return s.fsError("put", r.URI, err)
		}
	}
	err = s.tmp.closeFile(f, path.Base(tmp), r.Lastmod)
	f = nil
	if err != nil {
		return s.fsError("put", r.URI, err)
	}
	if err = ctx.Err(); err != nil {
		return errclass.Retryablef("fs: put %s: %w", short(r.URI), err)
	}
	rel := Encode(r.URI)
	if err = s.commit(tmp, rel); err != nil {
		return s.fsError("put", r.URI, err)
	}
	if s.opts.Fsync {
		if err := s.syncDir(path.Dir(rel)); err != nil {
			// The file is in place; only its durability is in doubt.
			return s.fsError("put", r.URI, err)
		}
		if err := s.syncFresh(path.Dir(rel)); err != nil {
			return s.fsError("put", r.URI, err)
		}
	}
	return nil
}

// markFresh records, with Options.Fsync, that dir is about to be created.
func (s *FS) markFresh(dir string) {
	if !s.opts.Fsync {
		return
	}
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	if s.fresh == nil {
		s.fresh = map[string]struct{}{}
	}
	s.fresh[dir] = struct{}{}
}

// isFresh says whether dir was created and its parent not synced since.
func (s *FS) isFresh(dir string) bool {
	s.freshMu.Lock()
	defer s.freshMu.Unlock()
	_, ok := s.fresh[dir]
	return ok
}

// syncFresh syncs the parent of dir and of each of its ancestors that
// this sink created and has not synced the parent of since, deepest
// first, so that dir's entry, and theirs, survive a power loss.
func (s *FS) syncFresh(dir string) error {
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if !s.isFresh(d) {
			continue
		}
		if err := s.syncDir(path.Dir(d)); err != nil {
			return err
		}
		s.freshMu.Lock()
		delete(s.fresh, d)
		s.freshMu.Unlock()
	}
	return nil
}

// commit renames tmp onto rel, creating rel's directories when the rename
// finds them missing. Should a directory still vanish between its creation
// and the rename (only another process could do that), both are tried
// again.
func (s *FS) commit(tmp, rel string) error {
	s.pruning.RLock()
	defer s.pruning.RUnlock()
	var err error
	for range commitAttempts {
		if err = s.tmp.rename(s.root, tmp, rel); !errors.Is(err, iofs.ErrNotExist) {
			return err
		}
		if merr := s.mkdirAll(path.Dir(rel)); merr != nil && !errors.Is(merr, iofs.ErrNotExist) {
			return merr
		}
	}
	return err // the last rename's: the file is not in place
}

// mkdirAll creates dir and its missing parents. Unlike os.Root.MkdirAll it
// takes a directory that another goroutine creates at the same time for
// one that exists. It makes one call when only dir is missing and walks
// down level by level otherwise, so that its cost grows linearly with the
// depth (every call through s.root resolves the whole path again).
func (s *FS) mkdirAll(dir string) error {
	s.markFresh(dir)
	if err := s.root.Mkdir(dir, dirPerm); !errors.Is(err, iofs.ErrNotExist) {
		return ignoreExist(err)
	}
	r := s.root
	defer func() { s.closeSub(r) }()
	at := ""
	for elem := range strings.SplitSeq(dir, "/") {
		at = path.Join(at, elem)
		sub, err := r.OpenRoot(elem)
		if errors.Is(err, iofs.ErrNotExist) {
			s.markFresh(at)
			if err := ignoreExist(r.Mkdir(elem, dirPerm)); err != nil {
				return err
			}
			sub, err = r.OpenRoot(elem)
		}
		if err != nil {
			return err
		}
		s.closeSub(r)
		r = sub
	}
	return nil
}

// pruneWindow bounds the directory handles prune holds open at once.
const pruneWindow = 64

// prune removes dir and then its parents, deepest first, while they are
// empty, never the sink's directory. It stops at the first that cannot be
// removed (not empty, or already gone). It works through handles on the
// parents, at most pruneWindow at a time, so that its cost grows linearly
// with the depth.
func (s *FS) prune(dir string) {
	elems := strings.Split(dir, "/")
	for n := len(elems); n > 0; {
		lo := max(0, n-pruneWindow)
		// parents[k] is the directory elems[:lo+k].
		parents := []*os.Root{s.root}
		if lo > 0 {
			base, err := s.root.OpenRoot(strings.Join(elems[:lo], "/"))
			if err != nil {
				return
			}
			parents[0] = base
		}
		done := false
		for i := lo; i < n-1 && !done; i++ {
			sub, err := parents[len(parents)-1].OpenRoot(elems[i])
			if err != nil {
				done = true
				break
			}
			parents = append(parents, sub)
		}
		for i := n - 1; i >= lo && !done; i-- {
			if k := i + 1 - lo; k < len(parents) {
				s.closeSub(parents[k])
				parents = parents[:k]
			}
			done = parents[i-lo].Remove(elems[i]) != nil
		}
		for _, p := range parents {
			s.closeSub(p)
		}
		if done {
			return
		}
		n = lo
	}
}

// closeSub closes a handle opened below s.root.
func (s *FS) closeSub(r *os.Root) {
	if r != nil && r != s.root {
		_ = r.Close()
	}
}

func ignoreExist(err error) error {
	if errors.Is(err, iofs.ErrExist) {
		return nil
	}
	return err
}

// syncDir syncs a directory. One that a concurrent Delete has pruned
// already needs no sync.
func (s *FS) syncDir(dir string) error {
	if s.dirSynced != nil {
		s.dirSynced(dir)
	}
	d, err := s.root.Open(dir)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// Delete removes the file of uri, and then each parent directory that is
// left empty, up to but not including the sink's directory. Deleting a URI
// that is not held is not an error. A ctx that has ended is a retryable
// error; a filesystem error is fatal.
func (s *FS) Delete(ctx context.Context, uri string) error {
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("fs: delete %s: %w", short(uri), err)
	}
	rel := Encode(uri)
	if err := s.root.Remove(rel); err != nil {
		if isNotExist(err) {
			return nil
		}
		return s.fsError("delete", uri, err)
	}
	s.pruning.Lock()
	defer s.pruning.Unlock()
	s.prune(path.Dir(rel))
	s.tmp.forgetAll() // handles on pruned directories would rename into nothing
	if s.opts.Fsync {
		// The nearest directory left holds the removal, the file's or
		// that of the last directory pruned.
		d := path.Dir(rel)
		for d != "." && !s.exists(d) {
			d = path.Dir(d)
		}
		if err := s.syncDir(d); err != nil {
			return s.fsError("delete", uri, err)
		}
	}
	return nil
}

// exists says whether dir is there (an error other than its absence
// counts as there: syncing it then tells).
func (s *FS) exists(dir string) bool {
	_, err := s.root.Lstat(dir)
	return !isNotExist(err)
}

// Get opens the file of uri for reading. When the sink does not hold uri
// the error satisfies errors.Is(err, fs.ErrNotExist).
func (s *FS) Get(ctx context.Context, uri string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, errclass.Retryablef("fs: get %s: %w", short(uri), err)
	}
	f, err := s.root.OpenFile(Encode(uri), os.O_RDONLY|openNonblock, 0)
	if err != nil {
		if isNotExist(err) {
			return nil, fmt.Errorf("fs: get %s: %w", short(uri), iofs.ErrNotExist)
		}
		return nil, s.fsError("get", uri, err)
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		_ = f.Close()
		if err != nil {
			return nil, s.fsError("get", uri, err)
		}
		return nil, fmt.Errorf("fs: get %s: not a regular file: %w", short(uri), iofs.ErrNotExist)
	}
	return f, nil
}

// Walk calls fn with the URI of every file the sink holds, directory by
// directory in order of the names. It skips the temporary directory, the
// directory of another sink under this one's (one holding its mark, see
// sinkMark), and logs and skips files
// whose paths Decode rejects (put there by something else) and anything
// that is not a regular file or a directory. Directories removed while the
// walk runs are skipped. An error from fn stops the walk and is returned as
// it is. Walk holds one open directory per level of the path it is in.
func (s *FS) Walk(ctx context.Context, fn func(uri string) error) error {
	return s.walkDir(ctx, s.root, "", fn)
}

func (s *FS) walkDir(ctx context.Context, r *os.Root, rel string, fn func(uri string) error) error {
	if err := ctx.Err(); err != nil {
		return errclass.Retryablef("fs: walk: %w", err)
	}
	f, err := r.Open(".")
	if err != nil {
		if rel != "" && isNotExist(err) {
			return nil
		}
		return s.fsError("walk", rel, err)
	}
	entries, err := f.ReadDir(-1)
	_ = f.Close()
	if err != nil && !(rel != "" && isNotExist(err)) {
		return s.fsError("walk", rel, err)
	}
	if rel != "" && slices.ContainsFunc(entries, func(e iofs.DirEntry) bool { return e.Name() == tmpDir && e.IsDir() }) {
		if info, err := r.Stat(tmpDir + "/" + sinkMark); err == nil && info.IsDir() {
			s.log.Info("skipping another sink's directory, under this one's", "dir", rel)
			return nil
		}
	}
	slices.SortFunc(entries, func(a, b iofs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range entries {
		p := e.Name()
		if rel != "" {
			p = rel + "/" + p
		}
		switch {
		case e.IsDir():
			if p == tmpDir {
				continue
			}
			sub, err := r.OpenRoot(e.Name())
			if err != nil {
				if isNotExist(err) {
					continue
				}
				return s.fsError("walk", p, err)
			}
			err = s.walkDir(ctx, sub, p, fn)
			_ = sub.Close()
			if err != nil {
				return err
			}
		case e.Type().IsRegular():
			uri, err := Decode(p)
			if err != nil {
				s.log.Warn("skipping a file that is not part of the mirror", "file", p, "err", err)
				continue
			}
			if err := fn(uri); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close releases the sink's directory handles. Every Put has committed or
// cleaned up by the time it returns, so there is nothing to flush. Calling
// it again is a no-op.
func (s *FS) Close(context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	// The own temporary directory is empty once every Put has returned;
	// it is removed while still locked.
	if err := s.root.RemoveAll(s.tmpRel); err != nil {
		s.log.Warn("cannot remove the temporary directory", "dir", s.tmpRel, "err", err)
	}
	if err := errors.Join(s.tmp.close(), s.root.Close()); err != nil {
		return errclass.Fatalf("fs sink %s: close: %w", s.dir, err)
	}
	return nil
}

// createTemp creates a new, empty temporary file and returns its name
// relative to the root.
func (s *FS) createTemp() (string, *tmpFile, error) {
	for {
		name := s.pid + "-" + strconv.FormatUint(s.seq.Add(1), 10)
		f, err := s.tmp.create(name)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		return s.tmpRel + "/" + name, f, err
	}
}

// fsError classifies a filesystem error: permanent when the name of this
// one URI is at fault (too long, rejected by the filesystem, or something
// foreign in the way of its path: a file, or a symbolic link the root
// does not follow out of it), fatal (the sink cannot go on) otherwise.
func (s *FS) fsError(op, uri string, err error) error {
	switch {
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EILSEQ),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY),
		errors.Is(err, iofs.ErrExist):
		return errclass.Permanentf("fs sink %s: %s %s: %w", s.dir, op, short(uri), err)
	}
	if link := s.linkInTheWay(Encode(uri)); link != "" {
		return errclass.Permanentf("fs sink %s: %s %s: a symbolic link in the way, %s: %w", s.dir, op, short(uri), link, err)
	}
	return errclass.Fatalf("fs sink %s: %s %s: %w", s.dir, op, short(uri), err)
}

// linkInTheWay returns the first of rel's directories, or rel, below the
// root, that is a symbolic link (the sink makes none), or "".
func (s *FS) linkInTheWay(rel string) string {
	for i := range len(rel) + 1 {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		st, err := s.root.Lstat(rel[:i])
		if err != nil {
			return ""
		}
		if st.Mode()&iofs.ModeSymlink != 0 {
			return rel[:i]
		}
	}
	return ""
}

// isNotExist reports whether err means a path is absent, also when a file
// stands where a directory of the path would be.
func isNotExist(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// short shortens a URI for messages.
func short(uri string) string {
	const shown = 200
	if len(uri) > shown {
		return strconv.Quote(uri[:shown]) + "…"
	}
	return strconv.Quote(uri)
}

// writerOnly hides the ReaderFrom of *os.File, so that io.CopyBuffer uses
// the pooled buffer.
type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }
