package fs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

func newPacked(t testing.TB, dir string, opts Options) *Packed {
	t.Helper()
	s, err := NewPacked(t.Context(), dir, opts)
	if err != nil {
		t.Fatalf("NewPacked(%q): %v", dir, err)
	}
	return s
}

func TestPackedConformance(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%t", fsync), func(t *testing.T) {
			sinktest.Run(t, func(t *testing.T) sink.Sink {
				return newPacked(t, t.TempDir(), Options{Fsync: fsync, Concurrency: 16})
			})
		})
	}
}

// rows opens dir's database apart from the sink and returns its rows (URI
// → body), as a reader with the sqlite3 tool would see them.
func rows(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, PackedFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.QueryContext(t.Context(), "SELECT uri, body FROM records")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	got := map[string]string{}
	for rs.Next() {
		var uri, body string
		if err := rs.Scan(&uri, &body); err != nil {
			t.Fatal(err)
		}
		got[uri] = body
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPackedFlush: writes are queued until Flush, which writes them in one
// transaction in the order they were made; they last past Close and show
// to any reader of the database, with their set and day.
func TestPackedFlush(t *testing.T) {
	dir := t.TempDir()
	s := newPacked(t, dir, Options{})
	ctx := t.Context()
	day := time.Date(2024, 5, 1, 23, 30, 0, 0, time.FixedZone("x", -2*3600))
	for i, uri := range []string{"oai:x:1", "oai:x:2", "oai:x:3"} {
		r := &sink.Resource{URI: uri, Length: -1, ResourceSet: "set-a", Lastmod: day, Type: "application/xml"}
		if err := s.Put(ctx, r, strings.NewReader(fmt.Sprint("body ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "oai:x:2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, &sink.Resource{URI: "oai:x:1", Length: -1}, strings.NewReader("body 1 again")); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, dir); len(got) != 0 {
		t.Errorf("before Flush the database holds %v", got)
	}
	if failed := s.Flush(ctx); len(failed) != 0 {
		t.Fatalf("Flush: %v", failed)
	}
	want := map[string]string{"oai:x:1": "body 1 again", "oai:x:3": "body 2"}
	if got := rows(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after Flush the database holds %v, want %v", got, want)
	}
	var set, d, lastmod, typ string
	db, err := sql.Open("sqlite", filepath.Join(dir, PackedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "SELECT resource_set, day, lastmod, type FROM records WHERE uri = 'oai:x:3'").Scan(&set, &d, &lastmod, &typ); err != nil {
		t.Fatal(err)
	}
	if set != "set-a" || d != "2024-05-02" || lastmod != "2024-05-02T01:30:00Z" || typ != "application/xml" {
		t.Errorf("row of oai:x:3: set %q, day %q, lastmod %q, type %q", set, d, lastmod, typ)
	}
	if err := s.Put(ctx, &sink.Resource{URI: "oai:x:4", Length: -1}, strings.NewReader("four")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = newPacked(t, dir, Options{})
	defer s.Close(ctx)
	want["oai:x:4"] = "four"
	if got := rows(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reopened, the database holds %v, want %v", got, want)
	}
}

// TestPackedFailedWrite: a batch the database refuses is reported whole by
// Flush, each write fatal, and nothing of it is written; the next batch is
// written.
func TestPackedFailedWrite(t *testing.T) {
	dir := t.TempDir()
	s := newPacked(t, dir, Options{})
	defer s.Close(t.Context())
	db, err := sql.Open("sqlite", filepath.Join(dir, PackedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.uri = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{"good", "bad"} {
		if err := s.Put(t.Context(), &sink.Resource{URI: uri, Length: -1}, strings.NewReader(uri)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	failed := s.Flush(t.Context())
	if len(failed) != 3 || failed[0].URI != "good" || failed[1].URI != "bad" || !failed[2].Delete {
		t.Fatalf("Flush reported %v, want the batch's three writes", failed)
	}
	for _, f := range failed {
		if !errclass.IsFatal(f.Err) || !strings.Contains(f.Err.Error(), "refused") {
			t.Errorf("failure %v: not fatal, or not the database's", f.Err)
		}
	}
	if got := rows(t, dir); len(got) != 0 {
		t.Errorf("a refused batch left %v", got)
	}
	if err := s.Put(t.Context(), &sink.Resource{URI: "next", Length: -1}, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if failed := s.Flush(t.Context()); len(failed) != 0 {
		t.Errorf("the next batch: %v", failed)
	}
	if got := rows(t, dir); len(got) != 1 {
		t.Errorf("after the next batch the database holds %v", got)
	}
}

// TestPackedLimits: a body longer than MaxPacked is refused for good and
// queues nothing; a queue past its bounds is written without a Flush.
func TestPackedLimits(t *testing.T) {
	dir := t.TempDir()
	s := newPacked(t, dir, Options{MaxPacked: 10})
	defer s.Close(t.Context())
	err := s.Put(t.Context(), &sink.Resource{URI: "big", Length: -1}, strings.NewReader(strings.Repeat("x", 11)))
	if !errclass.IsPermanent(err) || !strings.Contains(err.Error(), "maxpacked") {
		t.Errorf("a body of 11 bytes, MaxPacked 10: %v", err)
	}
	if err := s.Put(t.Context(), &sink.Resource{URI: "fits", Length: -1}, strings.NewReader(strings.Repeat("x", 10))); err != nil {
		t.Errorf("a body of 10 bytes: %v", err)
	}
	for i := range packedFlushOps {
		if err := s.Delete(t.Context(), fmt.Sprint("gone-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := rows(t, dir); len(got) != 1 {
		t.Errorf("a full queue was not written: the database holds %d rows", len(got))
	}
}

// TestPackedRefusesOtherLayouts: neither layout opens a directory that
// holds the other's mirror, nor the packed layout a foreign database or a
// shared directory.
func TestPackedRefusesOtherLayouts(t *testing.T) {
	files := t.TempDir()
	fsink := newFS(t, files, Options{})
	put(t, fsink, "http://example.com/a", "a")
	fsink.Close(t.Context())
	packed := t.TempDir()
	newPacked(t, packed, Options{}).Close(t.Context())
	foreign := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(foreign, PackedFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE other (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, tc := range []struct {
		name, arg, want string
	}{
		{"packed on files", files + "?layout=packed", "file layout"},
		{"files on packed", packed, "packed layout"},
		{"files on packed, said", packed + "?layout=files", "packed layout"},
		{"foreign database", foreign + "?layout=packed", "not a packed mirror"},
		{"shared", t.TempDir() + "?layout=packed&shared=1", "several machines"},
		{"unknown layout", t.TempDir() + "?layout=tar", "want files or packed"},
		{"maxpacked", t.TempDir() + "?layout=packed&maxpacked=0", "maxpacked"},
		{"maxpacked too big", t.TempDir() + "?layout=packed&maxpacked=9223372036854775807", "maxpacked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.Context(), tc.arg)
			if err == nil {
				s.Close(t.Context())
				t.Fatal("opened")
			}
			if !errclass.IsFatal(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: not fatal, or does not say %q", err, tc.want)
			}
		})
	}
	s, err := Open(t.Context(), packed+"?layout=packed&maxpacked=100&fsync=1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	if p, ok := s.(*Packed); !ok || p.opts.MaxPacked != 100 || !p.opts.Fsync || p.Dir() != packed {
		t.Errorf("Open gave %#v", s)
	}
	rc, err := s.(sink.Inventory).Get(t.Context(), "nothing")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get of nothing: %v", err)
		if rc != nil {
			_, _ = io.Copy(io.Discard, rc)
		}
	}
}

// TestPackedWalkPages: Walk reports every URI once, in order of their
// bytes, across its pages, and fn may write to the sink meanwhile.
func TestPackedWalkPages(t *testing.T) {
	s := newPacked(t, t.TempDir(), Options{})
	defer s.Close(t.Context())
	const n = 2*packedWalkPage + 345
	for i := range n {
		if err := s.Put(t.Context(), &sink.Resource{URI: fmt.Sprintf("u%05d", i), Length: -1}, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := s.Walk(t.Context(), func(uri string) error {
		got = append(got, uri)
		return s.Delete(t.Context(), uri)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("Walk reported %d URIs, want %d", len(got), n)
	}
	for i, uri := range got {
		if want := fmt.Sprintf("u%05d", i); uri != want {
			t.Fatalf("Walk's URI %d is %s, want %s", i, uri, want)
		}
	}
	if err := s.Walk(t.Context(), func(uri string) error { return fmt.Errorf("still held: %s", uri) }); err != nil {
		t.Error(err)
	}
}

// TestPackedOpenWhileWriting: a packed mirror opens while another process
// writes to it (holds its write lock), without waiting; and lost+found,
// as at the root of a file system, is not taken for a file layout's
// mirror.
func TestPackedOpenWhileWriting(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	newPacked(t, dir, Options{}).Close(t.Context())
	db, err := sql.Open("sqlite", filepath.Join(dir, PackedFile)+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // busy_timeout is 10 s
	defer cancel()
	s, err := NewPacked(ctx, dir, Options{})
	if err != nil {
		t.Fatalf("NewPacked while another holds the write lock: %v", err)
	}
	s.Close(t.Context())
}

// TestPackedRefusesLinks: a symbolic link planted at records.sqlite (or
// at its journal) is refused, and nothing is written where it points.
func TestPackedRefusesLinks(t *testing.T) {
	for _, name := range []string{PackedFile, PackedFile + "-wal"} {
		t.Run(name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			target := filepath.Join(outside, "elsewhere.sqlite")
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), dir+"?layout=packed")
			if err == nil {
				s.Close(t.Context())
				t.Fatal("opened a packed mirror through a symbolic link")
			}
			if !errclass.IsFatal(err) || !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("error %v: not fatal, or does not say why", err)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("written outside the sink: %v", entries)
			}
		})
	}
}
