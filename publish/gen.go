package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/flock"
)

// The layout of the output directory. Current is a symbolic link to the
// published generation, which is what a web server serves; a new generation
// is written beside it and the link replaced in one rename, so a reader
// sees one whole generation or the other, never a mix.
const (
	// Current names the link to the published generation.
	Current = "current"
	// genDir holds the generations: the published one, the one before it
	// (for readers that were walking it when the link moved) and, while a
	// run writes, the next.
	genDir = "generations"
	// sumsDir holds, under each generation's name, the list of its
	// documents' sizes and sha-256 digests, which the next run compares
	// against instead of reading the documents again.
	sumsDir  = "sums"
	lockFile = ".lock"
	tmpMark  = ".tmp-"
)

// generation is the set of documents one run writes: each is written in
// full to a new directory, and a document whose bytes equal the published
// one's is replaced by a hard link to it, so it keeps its inode and time
// (and so its ETag and Last-Modified) and is not rewritten.
type generation struct {
	out     string
	name    string // the new generation, under genDir
	dir     string // where it is written (a temporary name until commit)
	prev    string // the published generation's directory, or ""
	written int
	kept    int
	lock    *os.File
	// prevSums and sums hold each document's size and digest ("SIZE HEX"),
	// by path: the published generation's and this one's.
	prevSums, sums map[string]string
}

// openGeneration locks out and starts the next generation.
func openGeneration(out string) (*generation, error) {
	for _, d := range []string{genDir, sumsDir} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return nil, errclass.Fatalf("publish: %w", err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(out, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, errclass.Fatalf("publish: %w", err)
	}
	ok, err := flock.TryLock(lf)
	if err != nil || !ok {
		lf.Close()
		if err == nil {
			err = errors.New("another publish is writing it")
		}
		return nil, errclass.Fatalf("publish: %s: %w", out, err)
	}
	g := &generation{out: out, lock: lf, sums: map[string]string{}}
	n := 0
	if target, err := os.Readlink(filepath.Join(out, Current)); err == nil {
		g.prev = filepath.Join(out, target)
		n, _ = genNumber(filepath.Base(target))
		// Without the list (a generation being written, or removed by
		// hand) nothing is kept: every document is written again.
		g.prevSums = readSums(filepath.Join(out, sumsDir, filepath.Base(target)))
	} else if !errors.Is(err, os.ErrNotExist) {
		g.release()
		return nil, errclass.Fatalf("publish: %w", err)
	}
	// After the highest generation there is, not the published one's: a
	// run killed between renaming its generation into place and moving
	// the link left one, which the next commit removes.
	ents, err := os.ReadDir(filepath.Join(out, genDir))
	if err != nil {
		g.release()
		return nil, errclass.Fatalf("publish: %w", err)
	}
	for _, e := range ents {
		if k, ok := genNumber(e.Name()); ok {
			n = max(n, k)
		}
	}
	g.name = fmt.Sprintf("g%06d", n+1)
	g.dir = filepath.Join(out, genDir, tmpMark+g.name)
	_ = os.RemoveAll(g.dir) // a run killed before its commit
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		g.release()
		return nil, errclass.Fatalf("publish: %w", err)
	}
	return g, nil
}

func (g *generation) release() {
	if g.lock != nil {
		g.lock.Close()
		g.lock = nil
	}
}

// abort removes what the generation wrote; the published one is untouched.
func (g *generation) abort() {
	_ = os.RemoveAll(g.dir)
	_ = os.Remove(filepath.Join(g.out, sumsDir, g.name))
	g.release()
}

// readSums reads a generation's list of sizes and digests (see sumsDir);
// a list that cannot be read is empty.
func readSums(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(b)) {
		if size, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " "); ok {
			if sum, rel, ok := strings.Cut(rest, " "); ok {
				out[rel] = size + " " + sum
			}
		}
	}
	return out
}

// writeSums writes a generation's list, synced, under its final name.
func writeSums(path string, sums map[string]string) error {
	var b strings.Builder
	for _, rel := range slices.Sorted(maps.Keys(sums)) {
		b.WriteString(sums[rel] + " " + rel + "\n")
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// commit publishes the generation: the directory gets its final name, the
// link moves to it in one rename, and generations older than the one it
// replaces are removed.
func (g *generation) commit() error {
	defer g.release()
	final := filepath.Join(g.out, genDir, g.name)
	if err := writeSums(filepath.Join(g.out, sumsDir, g.name), g.sums); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	if err := syncDir(g.dir); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	if err := os.Rename(g.dir, final); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	g.dir = final
	tmp := filepath.Join(g.out, tmpMark+Current)
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Join(genDir, g.name), tmp); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(g.out, Current)); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	if err := syncDir(g.out); err != nil {
		return errclass.Fatalf("publish: %w", err)
	}
	keep := map[string]bool{g.name: true}
	if g.prev != "" {
		keep[filepath.Base(g.prev)] = true
	}
	for _, d := range []string{genDir, sumsDir} {
		ents, err := os.ReadDir(filepath.Join(g.out, d))
		if err != nil {
			return errclass.Fatalf("publish: %w", err)
		}
		for _, e := range ents {
			if !keep[e.Name()] {
				_ = os.RemoveAll(filepath.Join(g.out, d, e.Name()))
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// doc is one document being written into a generation.
type doc struct {
	g   *generation
	rel string
	f   *os.File
	h   hash.Hash
	n   int64
	// done: closed, and discard does nothing.
	done bool
}

// create starts the document at rel (slash-separated) in the generation.
func (g *generation) create(rel string) (*doc, error) {
	p := filepath.Join(g.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, errclass.Fatalf("publish: %w", err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, errclass.Fatalf("publish: %w", err)
	}
	return &doc{g: g, rel: rel, f: f, h: sha256.New()}, nil
}

func (d *doc) Write(p []byte) (int, error) {
	n, err := d.f.Write(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	if err != nil {
		return n, errclass.Fatalf("publish: write %s: %w", d.rel, err)
	}
	return n, nil
}

// discard removes an unfinished document; after close it does nothing.
func (d *doc) discard() {
	if d.done {
		return
	}
	d.done = true
	d.f.Close()
	_ = os.Remove(d.f.Name())
}

// close ends the document: it is synced, or, when the published generation
// has the same bytes at the same path (its size and digest say so), replaced
// by a link to that copy.
func (d *doc) close() error {
	d.done = true
	sum := fmt.Sprintf("%d %x", d.n, d.h.Sum(nil))
	d.g.sums[d.rel] = sum
	if d.g.prevSums[d.rel] == sum {
		if err := d.f.Close(); err != nil {
			return errclass.Fatalf("publish: %s: %w", d.rel, err)
		}
		p := d.f.Name()
		if err := os.Remove(p); err != nil {
			return errclass.Fatalf("publish: %w", err)
		}
		if err := os.Link(filepath.Join(d.g.prev, filepath.FromSlash(d.rel)), p); err != nil {
			return errclass.Fatalf("publish: keep %s: %w", d.rel, err)
		}
		d.g.kept++
		return nil
	}
	if err := d.f.Sync(); err != nil {
		d.f.Close()
		return errclass.Fatalf("publish: %s: %w", d.rel, err)
	}
	if err := d.f.Close(); err != nil {
		return errclass.Fatalf("publish: %s: %w", d.rel, err)
	}
	if err := d.laterThanPrevious(); err != nil {
		return err
	}
	d.g.written++
	return nil
}

// laterThanPrevious gives a document written anew at a path the published
// generation has a second later modification time than the copy it
// replaces, when it would otherwise share that copy's second: the
// Last-Modified a client sends back (If-Modified-Since, whole seconds)
// then never has it take the new document for the one it holds.
func (d *doc) laterThanPrevious() error {
	if d.g.prev == "" {
		return nil
	}
	old, err := os.Stat(filepath.Join(d.g.prev, filepath.FromSlash(d.rel)))
	if err != nil {
		return nil // none: nothing to be later than
	}
	floor := old.ModTime().Truncate(time.Second).Add(time.Second)
	cur, err := os.Stat(d.f.Name())
	if err != nil {
		return errclass.Fatalf("publish: %s: %w", d.rel, err)
	}
	if !cur.ModTime().Before(floor) {
		return nil
	}
	if err := os.Chtimes(d.f.Name(), floor, floor); err != nil {
		return errclass.Fatalf("publish: %s: %w", d.rel, err)
	}
	return nil
}

// genNumber is the number of the generation named name (gNNNNNN); ok is
// false for any other name (a generation being written, .tmp-gNNNNNN).
func genNumber(name string) (n int, ok bool) {
	rest, ok := strings.CutPrefix(name, "g")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// published opens the document at rel of the published generation, or
// returns nil when there is none.
func (g *generation) published(rel string) *os.File {
	if g.prev == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(g.prev, filepath.FromSlash(rel)))
	if err != nil {
		return nil
	}
	return f
}

// keep links into the generation, as published, the document at rel and
// each of more, and returns rel's length and sha-256; ok is false, and
// nothing is kept, when the published generation's list (see sumsDir) lacks
// any of them or a link fails.
func (g *generation) keep(rel string, more ...string) (length int64, sum []byte, ok bool) {
	rels := append([]string{rel}, more...)
	for _, r := range rels {
		if g.prevSums[r] == "" {
			return 0, nil, false
		}
	}
	size, hexSum, _ := strings.Cut(g.prevSums[rel], " ")
	length, err := strconv.ParseInt(size, 10, 64)
	if err == nil {
		sum, err = hex.DecodeString(hexSum)
	}
	if err != nil || len(sum) != sha256.Size {
		return 0, nil, false
	}
	for i, r := range rels {
		p := filepath.Join(g.dir, filepath.FromSlash(r))
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.Link(filepath.Join(g.prev, filepath.FromSlash(r)), p)
		}
		if err != nil {
			for _, done := range rels[:i] {
				_ = os.Remove(filepath.Join(g.dir, filepath.FromSlash(done)))
			}
			return 0, nil, false
		}
	}
	for _, r := range rels {
		g.sums[r] = g.prevSums[r]
		g.kept++
	}
	return length, sum, true
}
