package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

func newFS(t testing.TB, dir string, opts Options) *FS {
	t.Helper()
	s, err := New(dir, opts)
	if err != nil {
		t.Fatalf("New(%q): %v", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%t", fsync), func(t *testing.T) {
			sinktest.Run(t, func(t *testing.T) sink.Sink {
				dir := t.TempDir()
				// Registered first, so it runs after the suite closes the sink.
				t.Cleanup(func() { wantNoTemp(t, dir) })
				return newFS(t, dir, Options{Fsync: fsync, Concurrency: 16})
			})
		})
	}
}

// wantNoTemp checks that no temporary file is left in dir (the open sinks'
// own, empty, temporary directories may be there).
func wantNoTemp(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(dir, tmpDir), func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("reading the temporary directory: %v", err)
	}
}

func put(t testing.TB, s *FS, uri, body string) {
	t.Helper()
	if err := s.Put(context.Background(), &sink.Resource{URI: uri, Length: int64(len(body))}, strings.NewReader(body)); err != nil {
		t.Fatalf("Put(%q): %v", uri, err)
	}
}

func walk(t *testing.T, s *FS) []string {
	t.Helper()
	var got []string
	if err := s.Walk(t.Context(), func(uri string) error {
		got = append(got, uri)
		return nil
	}); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	slices.Sort(got)
	return got
}

func TestStaleTempRemovedAtNew(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, tmpDir)
	if err := os.MkdirAll(filepath.Join(stale, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"123-1", "123-2", "sub/x"} {
		if err := os.WriteFile(filepath.Join(stale, name), []byte("half a body"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	wantNoTemp(t, dir)
	if got := walk(t, s); len(got) != 0 {
		t.Errorf("Walk after New = %q, want nothing", got)
	}
}

// TestHostileURIsStayInside puts every odd URI and checks, by walking the
// parent of DIR, that nothing was created outside DIR and that every file
// is where Path says.
func TestHostileURIsStayInside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "mirror")
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	uris := sinktest.OddURIs()
	for _, uri := range uris {
		put(t, s, uri, "x")
	}
	// Walk the parent through an os.Root: some paths exceed PATH_MAX.
	root, err := os.OpenRoot(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files := 0
	err = iofs.WalkDir(root.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && p != "mirror" && !strings.HasPrefix(p, "mirror/") {
			t.Errorf("created outside DIR: %q", p)
		}
		if d.Type().IsRegular() {
			files++
		} else if !d.IsDir() {
			t.Errorf("not a regular file or directory: %q", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != len(uris) {
		t.Errorf("%d files for %d URIs", files, len(uris))
	}
	for _, uri := range uris {
		if len(s.Path(uri)) > 4000 {
			continue // beyond PATH_MAX for plain os calls; the sink reaches it through os.Root
		}
		if info, err := os.Lstat(s.Path(uri)); err != nil || !info.Mode().IsRegular() {
			t.Errorf("Path(%q) = %q: not a regular file (%v)", uri, s.Path(uri), err)
		}
	}
	if got := walk(t, s); len(got) != len(uris) {
		t.Errorf("Walk reported %d URIs, want %d", len(got), len(uris))
	}
}

func TestSymlinkCannotLeadOutside(t *testing.T) {
	parent := t.TempDir()
	outside := filepath.Join(parent, "outside")
	dir := filepath.Join(parent, "mirror")
	if err := os.MkdirAll(filepath.Join(outside, "h"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "h", "@a")
	if err := os.WriteFile(victim, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	if err := os.Symlink(outside, filepath.Join(dir, "http")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.Put(ctx, &sink.Resource{URI: "http://h/b"}, strings.NewReader("x")); err == nil {
		t.Error("Put through a symbolic link leading outside DIR succeeded")
	}
	if err := s.Delete(ctx, "http://h/a"); err == nil {
		t.Error("Delete through a symbolic link leading outside DIR succeeded")
	}
	if rc, err := s.Get(ctx, "http://h/a"); err == nil {
		rc.Close()
		t.Error("Get through a symbolic link leading outside DIR succeeded")
	}
	if got := walk(t, s); len(got) != 0 {
		t.Errorf("Walk followed the link: %q", got)
	}
	entries, _ := os.ReadDir(filepath.Join(outside, "h"))
	if len(entries) != 1 {
		t.Errorf("outside DIR now holds %d entries, want the 1 it had", len(entries))
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "secret" {
		t.Errorf("file outside DIR changed: %q, %v", b, err)
	}
}

func TestNewErrors(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		opts Options
	}{
		{"empty", "", Options{}},
		{"under a file", filepath.Join(file, "sub"), Options{}},
		{"is a file", file, Options{}},
		{"negative concurrency", filepath.Join(parent, "ok"), Options{Concurrency: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.dir, tt.opts)
			if err == nil {
				s.Close(t.Context())
				t.Fatal("New succeeded")
			}
			if !errclass.IsFatal(err) {
				t.Errorf("error %v is not fatal", err)
			}
		})
	}
	t.Run("read-only", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root can write to read-only directories")
		}
		dir := filepath.Join(parent, "ro")
		if err := os.Mkdir(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		if _, err := New(dir, Options{}); !errclass.IsFatal(err) {
			t.Errorf("New on a read-only directory = %v, want a fatal error", err)
		}
	})
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		arg        string
		wantErr    bool
		wantFsync  bool
		wantConc   int
		wantShared bool
	}{
		{arg: dir + "?shared=1", wantConc: 2 * runtime.GOMAXPROCS(0), wantShared: true},
		{arg: dir + "?shared=no", wantErr: true},
		{arg: dir, wantConc: 2 * runtime.GOMAXPROCS(0)},
		{arg: dir + "?fsync=1", wantFsync: true, wantConc: 2 * runtime.GOMAXPROCS(0)},
		{arg: dir + "?fsync=false&concurrency=3", wantConc: 3},
		{arg: dir + "?fsync=maybe", wantErr: true},
		{arg: dir + "?concurrency=0", wantErr: true},
		{arg: dir + "?concurrency=x", wantErr: true},
		{arg: dir + "?bogus=1", wantErr: true},
		{arg: dir + "?%zz", wantErr: true},
		{arg: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, err := Open(t.Context(), tt.arg)
			if tt.wantErr {
				if err == nil {
					got.Close(t.Context())
					t.Fatal("Open succeeded")
				}
				if !errclass.IsFatal(err) {
					t.Errorf("error %v is not fatal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close(t.Context())
			s := got.(*FS)
			if s.opts.Fsync != tt.wantFsync || s.Concurrency() != tt.wantConc || s.Local() == tt.wantShared {
				t.Errorf("fsync %t, concurrency %d, local %t; want %t, %d, %t", s.opts.Fsync, s.Concurrency(), s.Local(), tt.wantFsync, tt.wantConc, !tt.wantShared)
			}
			// A shared directory's temporary files name their host too.
			host, _ := os.Hostname()
			if got := strings.HasPrefix(path.Base(s.tmpRel), tmpSafe(host)+"-"); got != tt.wantShared {
				t.Errorf("temporary directory %s: named by the host %t, want %t", s.tmpRel, got, tt.wantShared)
			}
		})
	}
	t.Run("registry", func(t *testing.T) {
		s, err := sink.Registry{"fs": Open}.Open(t.Context(), "fs:"+dir+"?fsync=1")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(t.Context())
		if s.(*FS).Dir() != dir {
			t.Errorf("Dir() = %q, want %q", s.(*FS).Dir(), dir)
		}
	})
}

func TestPath(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	want := filepath.Join(dir, "http", "example.com", "sub dir", "@café über.txt")
	if got := s.Path("http://example.com/sub dir/café über.txt"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

func TestLastmod(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{})
	defer s.Close(t.Context())
	lastmod := time.Date(2013, 1, 2, 13, 0, 0, 500_000_000, time.UTC)
	tests := []struct {
		name    string
		lastmod time.Time
	}{
		{"given", lastmod},
		{"zero", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uri := "http://example.com/lastmod/" + tt.name
			before := time.Now().Add(-time.Second)
			r := &sink.Resource{URI: uri, Length: 1, Lastmod: tt.lastmod}
			if err := s.Put(t.Context(), r, strings.NewReader("x")); err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(s.Path(uri))
			if err != nil {
				t.Fatal(err)
			}
			if tt.lastmod.IsZero() {
				if info.ModTime().Before(before) {
					t.Errorf("mtime %v, want about now", info.ModTime())
				}
			} else if !info.ModTime().Equal(tt.lastmod) {
				t.Errorf("mtime %v, want %v", info.ModTime(), tt.lastmod)
			}
		})
	}
}

func TestDeletePrunesEmptyDirectories(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	const (
		deep = "http://example.com/a/b/c/d"
		near = "http://example.com/a/x"
	)
	put(t, s, deep, "deep")
	put(t, s, near, "near")
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
		return err == nil
	}
	if err := s.Delete(t.Context(), deep); err != nil {
		t.Fatal(err)
	}
	if exists("http/example.com/a/b") {
		t.Error("empty directory a/b left behind")
	}
	if !exists("http/example.com/a/@x") {
		t.Fatal("sibling file removed")
	}
	if err := s.Delete(t.Context(), near); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal("DIR itself was removed:", err)
	}
	if len(entries) != 1 || entries[0].Name() != tmpDir {
		t.Errorf("DIR holds %v, want only %s", entries, tmpDir)
	}
}

// TestPutWhileDeletePrunes races Puts into a deep directory against Deletes
// that prune it.
func TestPutWhileDeletePrunes(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{})
	defer s.Close(t.Context())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			uri := fmt.Sprintf("http://example.com/p/q/r/s/w%d", w)
			for range 150 {
				if err := s.Put(t.Context(), &sink.Resource{URI: uri}, strings.NewReader("x")); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if err := s.Delete(t.Context(), uri); err != nil {
					t.Errorf("Delete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := walk(t, s); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

func TestWalkSkipsForeignFiles(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	const uri = "http://example.com/a"
	put(t, s, uri, "x")
	for _, rel := range []string{"README.txt", "http/example.com/plain", "lost+found/x", "http/example.com/@%61", "_other/x/@y"} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("@a", filepath.Join(dir, "http/example.com/@link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "http/example.com/@dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := walk(t, s); !slices.Equal(got, []string{uri}) {
		t.Errorf("Walk = %q, want only %q", got, uri)
	}
	if _, err := s.Get(t.Context(), "http://example.com/dir"); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("Get of a path holding a directory = %v, want fs.ErrNotExist", err)
	}
}

var errFixity = errclass.Permanentf("fixity mismatch")

func TestPutErrorClasses(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	// A file where the directory "blocked" of a URI would go.
	if err := os.WriteFile(filepath.Join(dir, "blocked"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		ctx   context.Context
		uri   string
		body  io.Reader
		class errclass.Class
		is    error
	}{
		{"body error keeps its class", t.Context(), "http://h/a", io.MultiReader(strings.NewReader("data"), errReader{errFixity}), errclass.Permanent, errFixity},
		{"cancelled is retryable", cancelled, "http://h/a", strings.NewReader("x"), errclass.Retryable, context.Canceled},
		{"a file in the way is permanent", t.Context(), "blocked://h/a", strings.NewReader("x"), errclass.Permanent, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Put(tt.ctx, &sink.Resource{URI: tt.uri}, tt.body)
			if got := errclass.Of(err); got != tt.class {
				t.Errorf("Put error %v has class %v, want %v", err, got, tt.class)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Put error %v does not wrap %v", err, tt.is)
			}
		})
	}
	t.Run("broken sink is fatal", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(dir, tmpDir)); err != nil {
			t.Fatal(err)
		}
		err := s.Put(t.Context(), &sink.Resource{URI: "http://h/a"}, strings.NewReader("x"))
		if !errclass.IsFatal(err) {
			t.Errorf("Put without a temporary directory = %v, want a fatal error", err)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestCloseTwice(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{})
	for range 2 {
		if err := s.Close(t.Context()); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
}

// BenchmarkPut writes 50 KiB files, reporting files/s.
func BenchmarkPut(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 50<<10/16)
	tests := []struct {
		name     string
		opts     Options
		parallel bool
		lastmod  time.Time
	}{
		{"serial", Options{}, false, time.Time{}},
		{"serial-lastmod", Options{}, false, time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"parallel", Options{}, true, time.Time{}},
		{"serial-fsync", Options{Fsync: true}, false, time.Time{}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			s := newFS(b, b.TempDir(), tt.opts)
			defer s.Close(context.Background())
			var seq atomic.Int64
			one := func() {
				i := seq.Add(1)
				uri := fmt.Sprintf("http://example.com/bench/%03d/%d.dat", i%100, i)
				r := &sink.Resource{URI: uri, Length: int64(len(body)), Lastmod: tt.lastmod}
				if err := s.Put(context.Background(), r, bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			start := time.Now()
			if tt.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
			} else {
				for b.Loop() {
					one()
				}
			}
			b.ReportMetric(float64(seq.Load())/time.Since(start).Seconds(), "files/s")
		})
	}
}

// TestTempOfLiveProcessKept: opening a sink on a directory another open
// sink (another process: the lock is per open file) is writing into leaves
// that sink's temporary files alone, and removes those of ended ones.
func TestTempOfLiveProcessKept(t *testing.T) {
	dir := t.TempDir()
	a := newFS(t, dir, Options{})
	inFlight := filepath.Join(dir, filepath.FromSlash(a.tmpRel), "123-7")
	if err := os.WriteFile(inFlight, []byte("half a body being written"), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(dir, tmpDir, "99999-deadbeef")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "99999-1"), []byte("left by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newFS(t, dir, Options{})
	if _, err := os.Stat(inFlight); err != nil {
		t.Errorf("the open sink's temporary file was removed: %v", err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the ended process's temporary directory is still there: %v", err)
	}
	put(t, b, "http://example.org/b", "written by b")
	if err := os.Remove(inFlight); err != nil {
		t.Fatal(err)
	}
	put(t, a, "http://example.org/a", "written by a")
	for _, s := range []*FS{a, b} {
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := tmpLeft(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("after both closed the temporary directory holds %v (%v)", entries, err)
	}
	c := newFS(t, dir, Options{})
	defer c.Close(t.Context())
	if got := walk(t, c); len(got) != 2 {
		t.Errorf("mirror holds %q", got)
	}
}

// TestManyDirectoriesConcurrently: Puts into more directories than the
// sink keeps handles on (handles evicted while others rename through
// them), from several goroutines, all land.
func TestManyDirectoriesConcurrently(t *testing.T) {
	dir := t.TempDir()
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	const dirs = 400
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range dirs {
				uri := fmt.Sprintf("http://example.com/d%d/f", (i*7+w*53)%dirs)
				if err := s.Put(t.Context(), &sink.Resource{URI: uri}, strings.NewReader(uri)); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range dirs {
		uri := fmt.Sprintf("http://example.com/d%d/f", i)
		if b, err := os.ReadFile(s.Path(uri)); err != nil || string(b) != uri {
			t.Fatalf("%s: %q, %v", uri, b, err)
		}
	}
}

// TestMovedDirectory: a directory the sink renamed into before, then
// moved out of DIR (to a backup), renamed within it, or swapped for a
// symbolic link leading outside, does not take the next Put of a file of
// that directory: nothing lands outside DIR, and a Put that succeeds is
// at its path, where Get finds it; the link in the way fails the Put,
// permanently (its URI's own failure).
func TestMovedDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(t *testing.T, hdir, dir, outside string)
	}{
		{"moved out of DIR", func(t *testing.T, hdir, _, outside string) {
			if err := os.Rename(hdir, filepath.Join(outside, "backup")); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed within DIR", func(t *testing.T, hdir, _, _ string) {
			if err := os.Rename(hdir, hdir+".old"); err != nil {
				t.Fatal(err)
			}
		}},
		{"swapped for a link outside", func(t *testing.T, hdir, dir, outside string) {
			if err := os.Rename(hdir, filepath.Join(dir, "moved")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, hdir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			outside := filepath.Join(parent, "outside")
			dir := filepath.Join(parent, "mirror")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			s := newFS(t, dir, Options{})
			defer s.Close(t.Context())
			ctx := t.Context()
			if err := s.Put(ctx, &sink.Resource{URI: "http://h/a"}, strings.NewReader("a")); err != nil {
				t.Fatal(err)
			}
			tc.move(t, filepath.Dir(s.Path("http://h/a")), dir, outside)
			// What is outside DIR, the directory moved there included.
			outsideFiles := func() []string {
				var names []string
				filepath.WalkDir(outside, func(p string, _ iofs.DirEntry, _ error) error {
					names = append(names, p)
					return nil
				})
				return names
			}
			before := outsideFiles()
			err := s.Put(ctx, &sink.Resource{URI: "http://h/b"}, strings.NewReader("b"))
			if after := outsideFiles(); !slices.Equal(after, before) {
				t.Errorf("outside DIR: %v, before the Put %v", after, before)
			}
			if err != nil {
				if c := errclass.Of(err); c != errclass.Permanent || tc.name != "swapped for a link outside" {
					t.Errorf("Put: %v (%v)", err, c)
				}
				return
			}
			rc, err := s.Get(ctx, "http://h/b")
			if err != nil {
				t.Fatalf("Put succeeded, then Get: %v", err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "b" {
				t.Errorf("Get = %q", b)
			}
		})
	}
}

// TestLastmodPastNanoseconds: a lastmod beyond what nanoseconds since 1970
// hold (past 2262) is the file's modification time as well, or the latest
// the file system keeps: never a time wrapped around to 1901.
func TestLastmodPastNanoseconds(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{})
	defer s.Close(t.Context())
	late := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		uri     string
		lastmod time.Time
	}{
		{"http://h/2300", late},
		{"http://h/never", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
	} {
		if err := s.Put(t.Context(), &sink.Resource{URI: tc.uri, Lastmod: tc.lastmod}, strings.NewReader("x")); err != nil {
			t.Fatalf("Put: %v", err)
		}
		st, err := os.Stat(s.Path(tc.uri))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.ModTime(); tc.lastmod.Equal(late) && !got.Equal(late) || got.Before(late) {
			t.Errorf("lastmod %s: the file's modification time is %s", tc.lastmod, got.UTC())
		}
	}
}

// TestGetOfAFifo: Get of a path where something else planted a FIFO
// answers that the sink does not hold the URI, instead of waiting for a
// writer to open the FIFO.
func TestGetOfAFifo(t *testing.T) {
	s := newFS(t, t.TempDir(), Options{})
	defer s.Close(t.Context())
	const uri = "http://h/fifo"
	p := s.Path(uri)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		rc, err := s.Get(t.Context(), uri)
		if err == nil {
			rc.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, iofs.ErrNotExist) {
			t.Errorf("Get of a FIFO: %v, want fs.ErrNotExist", err)
		}
	case <-time.After(time.Minute):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // lets the blocked open return
		}
		<-done
		t.Errorf("Get of a FIFO waited for a writer")
	}
}

// TestForeignLinkInTheWay: a symbolic link leading out of DIR, planted
// where a URI's directory or file goes, is something foreign in the way
// of that URI, as a file there is: Put, Get and Delete of it fail
// permanently (that URI's own failure; the others go on), and nothing is
// written outside DIR.
func TestForeignLinkInTheWay(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "mirror")
	outside := filepath.Join(parent, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newFS(t, dir, Options{})
	defer s.Close(t.Context())
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), &sink.Resource{URI: "http://h/f"}, strings.NewReader("f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.Path("http://h/f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "f"), s.Path("http://h/f")); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"linked://h/a", "http://h/f"} {
		err := s.Put(t.Context(), &sink.Resource{URI: uri}, strings.NewReader("x"))
		if c := errclass.Of(err); c != errclass.Permanent && uri != "http://h/f" {
			t.Errorf("Put of %s below a foreign link: %v (%v), want permanent", uri, err, c)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Fatalf("written outside DIR: %v", entries)
		}
		if rc, err := s.Get(t.Context(), uri); err == nil {
			rc.Close()
		} else if errclass.IsFatal(err) {
			t.Errorf("Get of %s: %v is fatal", uri, err)
		}
		if err := s.Delete(t.Context(), uri); errclass.IsFatal(err) {
			t.Errorf("Delete of %s: %v is fatal", uri, err)
		}
	}
}

// TestNestedSinksApart: a sink whose directory is under another sink's
// (two sites' mirrors, one inside the other) is not walked by the outer
// sink as files of its own ("site2://http/…"), so an audit's repair,
// which deletes what a sink holds beyond the state, leaves it alone.
func TestNestedSinksApart(t *testing.T) {
	dir := t.TempDir()
	outer := newFS(t, dir, Options{})
	inner := newFS(t, filepath.Join(dir, "site2"), Options{})
	put(t, inner, "http://example.com/x", "inner's body")
	put(t, outer, "http://example.com/y", "outer's body")
	if got := walk(t, outer); !slices.Equal(got, []string{"http://example.com/y"}) {
		t.Errorf("Walk of the outer sink = %q, want only its own resource", got)
	}
	if got := walk(t, inner); !slices.Equal(got, []string{"http://example.com/x"}) {
		t.Errorf("Walk of the inner sink = %q", got)
	}
}
