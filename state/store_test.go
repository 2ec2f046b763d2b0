package state

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/internal/testbin"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	return openClosed(t, path), path
}

// openPostgresTemp opens a store in a PostgreSQL server of its own,
// started for tb and stopped after it, and returns the server's URL.
func openPostgresTemp(tb testing.TB) (*Store, string) {
	tb.Helper()
	server, stop, err := testbin.Postgres(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return openClosed(tb, server), server
}

// openClosed opens the store at path (a file or a postgres:// URL),
// closed when tb ends, a failure to close an error of tb's.
func openClosed(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), path)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustRun(t testing.TB, s *Store) int64 {
	t.Helper()
	id, err := s.BeginRun(context.Background(), Run{Mode: "baseline", Source: "http://example.com/"})
	if err != nil {
		t.Fatalf("BeginRun: %v", err)
	}
	return id
}

func wantFatal(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	if !errclass.IsFatal(err) {
		t.Fatalf("error %v is %v, want fatal", err, errclass.Of(err))
	}
}

// sameTime reports whether got (read from the store, so in UTC) is the instant want.
func sameTime(got, want time.Time) bool { return got.Equal(want) && got.Location() == time.UTC }

func diffResource(got, want Resource) string {
	var d []string
	if got.URI != want.URI || got.Source != want.Source || got.ResourceSet != want.ResourceSet ||
		got.Length != want.Length || got.Type != want.Type || got.Package != want.Package ||
		got.Outcome != want.Outcome || got.Deleted != want.Deleted || got.RunID != want.RunID ||
		got.ETag != want.ETag || got.LastModified != want.LastModified || got.Verified != want.Verified {
		d = append(d, fmt.Sprintf("scalars: got %+v, want %+v", got, want))
	}
	if !got.Hashes.Equal(want.Hashes) || !slices.Equal(got.Hashes.Unknown, want.Hashes.Unknown) ||
		(got.Hashes.MD5 == nil) != (want.Hashes.MD5 == nil) || (got.Hashes.SHA1 == nil) != (want.Hashes.SHA1 == nil) ||
		(got.Hashes.SHA256 == nil) != (want.Hashes.SHA256 == nil) || (got.Hashes.SHA512 == nil) != (want.Hashes.SHA512 == nil) {
		d = append(d, fmt.Sprintf("hashes: got %q, want %q", got.Hashes, want.Hashes))
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{{"Lastmod", got.Lastmod, want.Lastmod}, {"ChangeTime", got.ChangeTime, want.ChangeTime}, {"Updated", got.Updated, want.Updated}} {
		if !sameTime(f.got, f.want) {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", f.name, f.got, f.want))
		}
	}
	return strings.Join(d, "; ")
}

func hashesOf(t testing.TB, s string) fixity.Hashes {
	t.Helper()
	h, err := fixity.ParseList(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const (
	md5Hex    = "md5:1e0d5cb8ef6ba40c99b14c0237be735e"
	sha1Hex   = "sha-1:2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
	sha256Hex = "sha-256:854f61290e2e197a11bc91063afce22e43f8ccc655237050ace766adc68dc784"
)

func TestOpenCreatesAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}

	var mode string
	if err := s.r.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	for _, p := range []struct {
		pragma string
		want   int64
	}{{"foreign_keys", 1}, {"synchronous", 1}, {"busy_timeout", 10000}, {"application_id", applicationID}, {"temp_store", 2}} {
		var got int64
		if err := s.w.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(&got); err != nil || got != p.want {
			t.Errorf("PRAGMA %s = %d, %v; want %d", p.pragma, got, err, p.want)
		}
	}
	if _, err := s.r.ExecContext(ctx, "DELETE FROM resources"); err == nil {
		t.Error("the read pool accepted a write")
	}

	id := mustRun(t, s)
	r := Resource{URI: "http://example.com/a", Length: 3, Outcome: OutcomeWritten, RunID: id}
	if err := s.PutResources(ctx, []Resource{r}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 { // reopening runs no migration twice
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		var versions, max int
		if err := s2.r.QueryRowContext(ctx, "SELECT count(*), max(version) FROM schema_version").Scan(&versions, &max); err != nil {
			t.Fatal(err)
		}
		if versions != len(migrations()) || max != len(migrations()) {
			t.Errorf("schema_version has %d rows, max %d; want %d", versions, max, len(migrations()))
		}
		got, ok, err := s2.Resource(ctx, r.Source, r.URI)
		if err != nil || !ok || got.Length != 3 || got.RunID != id {
			t.Errorf("after reopen: %+v, %v, %v", got, ok, err)
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRejects(t *testing.T) {
	ctx := context.Background()
	header := []byte("SQLite format 3\x00")
	random := make([]byte, 8192)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, path string) // creates the file
		want     error                           // wrapped sentinel, or nil for "any"
		sameFile bool                            // the file must be left byte for byte
	}{
		{"text file", func(t *testing.T, p string) {
			writeFile(t, p, []byte(strings.Repeat("this is not a database\n", 100)))
		}, ErrNotStateFile, true},
		{"random bytes", func(t *testing.T, p string) { writeFile(t, p, random) }, ErrNotStateFile, true},
		{"header then garbage", func(t *testing.T, p string) {
			writeFile(t, p, append(append([]byte{}, header...), random...))
		}, ErrNotStateFile, true},
		{"another application's database", func(t *testing.T, p string) {
			db, err := sql.Open("sqlite", p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)"); err != nil {
				t.Fatal(err)
			}
		}, ErrNotStateFile, true},
		{"newer schema", func(t *testing.T, p string) {
			s, err := Open(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.w.Exec("INSERT INTO schema_version (version, applied) VALUES (?, 'later')", len(migrations())+1); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, ErrSchemaNewer, false},
		{"missing directory", func(t *testing.T, p string) {}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if tt.name == "missing directory" {
				path = filepath.Join(t.TempDir(), "no", "such", "dir", "state.db")
			}
			tt.setup(t, path)
			before, _ := os.ReadFile(path)
			s, err := Open(ctx, path)
			if err == nil {
				s.Close()
			}
			wantFatal(t, err)
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v does not wrap %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if tt.sameFile {
				after, _ := os.ReadFile(path)
				if !bytes.Equal(before, after) {
					t.Error("Open modified the file it rejected")
				}
				// Opened for a run, the same, and no lock file left.
				s, err := OpenExclusive(ctx, path, "test", 0)
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("OpenExclusive: %v, want %v", err, tt.want)
				}
				if _, err := os.Stat(LockPath(path)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a lock file is left beside the file rejected: %v", err)
				}
			}
		})
	}
	for _, p := range []string{"", ":memory:"} {
		_, err := Open(ctx, p)
		wantFatal(t, err)
	}
}

// TestOpenConcurrently opens a fresh file from several goroutines at once
// (as two processes might): every Open succeeds, migrations run once, and
// the stores see each other's commits.
func TestOpenConcurrently(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	stores := make([]*Store, 4)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	var versions int
	if err := stores[0].r.QueryRowContext(ctx, "SELECT count(*) FROM schema_version").Scan(&versions); err != nil || versions != len(migrations()) {
		t.Errorf("schema_version rows = %d, %v", versions, err)
	}
	for i, s := range stores {
		if err := s.PutResources(ctx, []Resource{{URI: fmt.Sprint("u", i), Length: -1, Outcome: OutcomeWritten}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range stores {
		if n, err := s.CountResources(ctx, "", true); err != nil || n != int64(len(stores)) {
			t.Errorf("store %d counts %d, %v", i, n, err)
		}
	}
}

// TestOpenWhileWriting: a store whose schema is up to date opens while
// another holds the write lock (a harvest committing), without waiting
// for it.
func TestOpenWhileWriting(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.beginWrite(ctx) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	octx, cancel := context.WithTimeout(ctx, 5*time.Second) // busy_timeout is 10 s
	defer cancel()
	other, err := Open(octx, path)
	if err != nil {
		t.Fatalf("Open while another holds the write lock: %v", err)
	}
	other.Close()
}

func TestOpenPaths(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		rel  string // under a temp dir
		cwd  bool   // open by a path relative to the working directory
	}{
		{"odd characters", filepath.Join("a b?c#d%e&f=g", "state 1.db"), false},
		{"unicode", filepath.Join("dïr", "ståte.db"), false},
		{"relative", filepath.Join("sub", "state.db"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			full := filepath.Join(dir, tt.rel)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			path := full
			if tt.cwd {
				t.Chdir(dir)
				path = tt.rel
			}
			for range 2 {
				s, err := Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SetCheckpoint(ctx, Checkpoint{Source: "http://x/"}); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			entries, err := os.ReadDir(filepath.Dir(full))
			if err != nil || len(entries) != 1 || entries[0].Name() != filepath.Base(full) {
				t.Errorf("directory holds %v, %v; want only %s", entries, err, filepath.Base(full))
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeTime(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name    string
		in      time.Time
		want    any
		wantErr bool
	}{
		{"zero", time.Time{}, nil, false},
		{"zero in a zone", time.Time{}.In(paris), nil, false},
		{"first nanosecond", time.Time{}.Add(1), "0001-01-01T00:00:00.000000001Z", false},
		{"nanoseconds in a zone", time.Date(2013, 1, 2, 14, 0, 0, 123456789, paris), "2013-01-02T13:00:00.123456789Z", false},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), "9999-12-31T23:59:59.999999999Z", false},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), nil, true},
		{"negative year", time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := encodeTime(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("encodeTime = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil {
				return
			}
			var ns sql.NullString
			if got != nil {
				ns = sql.NullString{String: got.(string), Valid: true}
			}
			back, err := decodeTime("x", ns)
			if err != nil || !sameTime(back, tt.in) {
				t.Fatalf("decodeTime = %v, %v; want %v", back, err, tt.in)
			}
		})
	}
	// Text order is time order.
	a, _ := encodeTime(time.Date(2020, 1, 1, 0, 0, 0, 500000000, time.UTC))
	b, _ := encodeTime(time.Date(2020, 1, 1, 0, 0, 1, 0, time.UTC))
	if !(a.(string) < b.(string)) {
		t.Errorf("%v sorts after %v", a, b)
	}
}

func TestRuns(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	started := time.Date(2024, 5, 6, 7, 8, 9, 10, time.FixedZone("X", -7200))

	id1, err := s.BeginRun(ctx, Run{ID: 99, Mode: "baseline", Source: "http://a/", Started: started})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	id2, err := s.BeginRun(ctx, Run{Mode: "incremental", Source: "http://b/", Status: "queued", Report: []byte(`{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if id1 == 99 || id2 <= id1 {
		t.Fatalf("ids %d, %d", id1, id2)
	}

	r1, err := s.Run(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID != id1 || r1.Mode != "baseline" || r1.Source != "http://a/" || r1.Status != StatusRunning ||
		!sameTime(r1.Started, started) || !r1.Finished.IsZero() || r1.Report != nil {
		t.Errorf("Run(%d) = %+v", id1, r1)
	}
	r2, err := s.Run(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Status != "queued" || string(r2.Report) != `{"x":1}` || r2.Started.Before(before.Add(-time.Second)) {
		t.Errorf("Run(%d) = %+v", id2, r2)
	}

	finished := started.Add(time.Hour + 1)
	report := []byte(`{"written": 3, "failed": []}`)
	if err := s.FinishRun(ctx, id1, finished, "ok", report); err != nil {
		t.Fatal(err)
	}
	r1, err = s.Run(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Status != "ok" || !sameTime(r1.Finished, finished) || !bytes.Equal(r1.Report, report) {
		t.Errorf("after FinishRun: %+v", r1)
	}
	if err := s.FinishRun(ctx, id2, time.Time{}, "failed", nil); err != nil {
		t.Fatal(err)
	}
	if r2, err = s.Run(ctx, id2); err != nil || r2.Report != nil || !r2.Finished.IsZero() || r2.Status != "failed" {
		t.Errorf("after FinishRun with nil report: %+v, %v", r2, err)
	}

	for _, tc := range []struct {
		limit int
		want  []int64
	}{{0, []int64{id2, id1}}, {-1, []int64{id2, id1}}, {1, []int64{id2}}, {5, []int64{id2, id1}}} {
		runs, err := s.Runs(ctx, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("Runs(%d) ids = %v, want %v", tc.limit, ids, tc.want)
		}
	}

	errTests := []struct {
		name     string
		err      error
		notFound bool
	}{
		{"Run unknown", second(s.Run(ctx, 12345)), true},
		{"FinishRun unknown", s.FinishRun(ctx, 12345, time.Now(), "ok", nil), true},
		{"FinishRun empty status", s.FinishRun(ctx, id1, time.Now(), "", nil), false},
		{"FinishRun bad JSON", s.FinishRun(ctx, id1, time.Now(), "ok", []byte("{")), false},
		{"BeginRun bad JSON", second(s.BeginRun(ctx, Run{Report: []byte{}})), false},
		{"BeginRun bad time", second(s.BeginRun(ctx, Run{Started: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)})), false},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			wantFatal(t, tt.err)
			if errors.Is(tt.err, ErrNotFound) != tt.notFound {
				t.Errorf("errors.Is(%v, ErrNotFound) != %v", tt.err, tt.notFound)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }

func TestResourceRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	zone := time.FixedZone("Z+5:30", 5*3600+1800)
	when := time.Date(2023, 3, 4, 5, 6, 7, 890123456, zone)

	tests := []struct {
		name string
		r    Resource
	}{
		{"every field", Resource{
			URI: "http://example.com/res/1?q=a&b=ü", Source: "http://example.com/.well-known/resourcesync",
			ResourceSet: "http://example.com/capabilitylist.xml", Length: 1234,
			Hashes: hashesOf(t, md5Hex+" "+sha1Hex+" "+sha256Hex+" sha-512:"+strings.Repeat("ab", 64)+" sha-384:abcd"),
			Type:   "text/html; charset=utf-8", Lastmod: when, ChangeTime: when.Add(time.Nanosecond),
			Package: "http://example.com/dump/part1.zip", Outcome: OutcomeWritten, RunID: run,
			Updated: when.Add(time.Hour), ETag: `W/"abc"`, LastModified: "Tue, 15 Nov 1994 12:45:26 GMT",
			Verified: VerifiedHash,
		}},
		{"zero times, nil hashes, unknown length, no run", Resource{
			URI: "http://example.com/res/2", Length: -1, Outcome: OutcomeUnchanged,
			Updated: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		}},
		{"sha-256 only, empty length", Resource{
			URI: "http://example.com/res/3", Length: 0, Hashes: hashesOf(t, sha256Hex), Outcome: OutcomeFailed,
			Updated: when, Verified: VerifiedLengthCRC,
		}},
		{"tombstone", Resource{
			URI: "http://example.com/res/4", Length: -1, Outcome: OutcomeDeleted, Deleted: true,
			ChangeTime: when, RunID: run, Updated: when,
		}},
	}
	var all []Resource
	for _, tt := range tests {
		all = append(all, tt.r)
	}
	if err := s.PutResources(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := s.Resource(ctx, tt.r.Source, tt.r.URI)
			if err != nil || !ok {
				t.Fatalf("Resource = %v, %v", ok, err)
			}
			if d := diffResource(got, tt.r); d != "" {
				t.Error(d)
			}
		})
	}

	if _, ok, err := s.Resource(ctx, "", "http://example.com/absent"); ok || err != nil {
		t.Errorf("absent: %v, %v", ok, err)
	}

	// A zero Updated is filled with the time of the commit.
	before := time.Now()
	if err := s.PutResources(ctx, []Resource{{URI: "u:updated", Length: -1, Outcome: OutcomeWritten}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Resource(ctx, "", "u:updated")
	if err != nil || got.Updated.Before(before.Add(-time.Second)) || got.Updated.After(time.Now().Add(time.Second)) {
		t.Errorf("Updated = %v, %v; want about now", got.Updated, err)
	}

	n, err := s.CountResources(ctx, "", false)
	if err != nil || n != 4 {
		t.Errorf("CountResources(false) = %d, %v; want 4", n, err)
	}
	n, err = s.CountResources(ctx, "", true)
	if err != nil || n != 5 {
		t.Errorf("CountResources(true) = %d, %v; want 5", n, err)
	}
}

func TestPutResourcesOverwrite(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	t0 := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
	full := Resource{
		URI: "http://x/1", Source: "http://x/", ResourceSet: "http://x/cl", Length: 10,
		Hashes: hashesOf(t, md5Hex+" "+sha256Hex), Type: "text/plain", Lastmod: t0, ChangeTime: t0,
		Package: "http://x/p.zip", Outcome: OutcomeWritten, RunID: run, Updated: t0, ETag: "e", LastModified: "lm",
	}
	bare := Resource{URI: "http://x/1", Source: full.Source, Length: -1, Outcome: OutcomeDeleted, Deleted: true, Updated: t0.Add(time.Hour)}
	changed := full
	changed.Length, changed.Hashes, changed.Updated = 11, hashesOf(t, sha1Hex), t0.Add(2*time.Hour)

	steps := []struct {
		name  string
		batch []Resource
		want  Resource
	}{
		{"insert", []Resource{full}, full},
		{"overwrite clears fields", []Resource{bare}, bare},
		{"overwrite again", []Resource{changed}, changed},
		{"last in a batch wins", []Resource{full, bare, changed, full}, full},
	}
	for _, st := range steps {
		if err := s.PutResources(ctx, st.batch); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got, ok, err := s.Resource(ctx, full.Source, full.URI)
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v", st.name, ok, err)
		}
		if d := diffResource(got, st.want); d != "" {
			t.Errorf("%s: %s", st.name, d)
		}
		if n, _ := s.CountResources(ctx, "", true); n != 1 {
			t.Errorf("%s: %d rows, want 1", st.name, n)
		}
	}
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run1, run2 := mustRun(t, s), mustRun(t, s)
	at := time.Date(2021, 2, 3, 4, 5, 6, 7, time.UTC)
	fs := []Failure{
		{RunID: run1, URI: "http://x/a", Package: "http://x/p1.zip", Stage: "verify", Error: "md5 mismatch", Permanent: true, ChangeTime: at.Add(-time.Hour), At: at},
		{RunID: run2, URI: "http://x/b", Stage: "fetch", Error: "503", At: at},
		{RunID: run1, Package: "http://x/p2.zip", Stage: "fetch", Error: "connection reset", At: at.Add(time.Second)},
	}
	if err := s.AddFailures(ctx, fs); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Failures(ctx, run1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []Failure{fs[0], fs[2]}
	if len(got) != len(want) {
		t.Fatalf("Failures = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.RunID != w.RunID || g.URI != w.URI || g.Package != w.Package || g.Stage != w.Stage ||
			g.Error != w.Error || g.Permanent != w.Permanent || !sameTime(g.ChangeTime, w.ChangeTime) || !sameTime(g.At, w.At) {
			t.Errorf("failure %d = %+v, want %+v", i, g, w)
		}
	}
	if got, _, err := s.Failures(ctx, 999, 1000); err != nil || len(got) != 0 {
		t.Errorf("Failures(unknown) = %v, %v", got, err)
	}
	// A zero At is filled in.
	if err := s.AddFailures(ctx, []Failure{{RunID: run2, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	got, _, err = s.Failures(ctx, run2, 1000)
	if err != nil || len(got) != 2 || got[1].At.IsZero() {
		t.Errorf("Failures(run2) = %+v, %v", got, err)
	}
	wantFatal(t, s.AddFailures(ctx, []Failure{{RunID: 0, Error: "no run"}}))
	wantFatal(t, s.AddFailures(ctx, []Failure{{RunID: 999, Error: "unknown run"}}))
}

func TestChanges(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	dt := time.Date(2019, 9, 9, 9, 9, 9, 9, time.UTC)
	cs := []ChangeRecord{
		{URI: "http://x/a", Change: ChangeCreated, Datetime: dt, RunID: run, Package: "http://x/c1.zip"},
		{URI: "http://x/a", Change: ChangeUpdated, Datetime: dt.Add(time.Minute), RunID: run},
		{URI: "http://x/b", Change: ChangeDeleted, RunID: run},
		{URI: "http://x/c", Change: ChangeCreated}, // no run
	}
	if err := s.AddChanges(ctx, cs); err != nil {
		t.Fatal(err)
	}
	// Append-only: the same records again are new entries.
	if err := s.AddChanges(ctx, cs[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := s.Changes(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChangeRecord{cs[0], cs[1], cs[2], cs[0]}
	if len(got) != len(want) {
		t.Fatalf("Changes = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.URI != w.URI || g.Change != w.Change || !sameTime(g.Datetime, w.Datetime) || g.RunID != w.RunID || g.Package != w.Package {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
	}
	for _, bad := range []ChangeRecord{{URI: "", Change: ChangeCreated}, {URI: "u", Change: "moved"}, {URI: "u", Change: ChangeCreated, RunID: 999}} {
		wantFatal(t, s.AddChanges(ctx, []ChangeRecord{bad}))
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	next := time.Date(2024, 1, 1, 12, 0, 0, 1, time.FixedZone("Y", 3600))
	base := time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC)
	upd := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)

	if _, ok, err := s.Checkpoint(ctx, "http://x/", ""); ok || err != nil {
		t.Fatalf("before any: %v, %v", ok, err)
	}
	steps := []Checkpoint{
		{Source: "http://x/", ResourceSet: "http://x/cl1", Next: next, Baseline: base, Open: true, RunID: run, Updated: upd},
		{Source: "http://x/", ResourceSet: "http://x/cl2", Updated: upd},                            // zero times, no run
		{Source: "http://x/", ResourceSet: "http://x/cl1", Next: next.Add(time.Hour), Updated: upd}, // overwrite
		{Source: "http://x/", Updated: upd}, // whole source
	}
	for i, c := range steps {
		if err := s.SetCheckpoint(ctx, c); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got, ok, err := s.Checkpoint(ctx, c.Source, c.ResourceSet)
		if err != nil || !ok {
			t.Fatalf("step %d: %v, %v", i, ok, err)
		}
		if got.Source != c.Source || got.ResourceSet != c.ResourceSet || !sameTime(got.Next, c.Next) ||
			!sameTime(got.Baseline, c.Baseline) || got.Open != c.Open || got.RunID != c.RunID || !sameTime(got.Updated, c.Updated) {
			t.Errorf("step %d: got %+v, want %+v", i, got, c)
		}
	}
	// cl2 untouched by the cl1 overwrite.
	if got, ok, _ := s.Checkpoint(ctx, "http://x/", "http://x/cl2"); !ok || !got.Next.IsZero() {
		t.Errorf("cl2 = %+v, %v", got, ok)
	}
	// A zero Updated is filled in.
	if err := s.SetCheckpoint(ctx, Checkpoint{Source: "http://y/"}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Checkpoint(ctx, "http://y/", ""); got.Updated.IsZero() {
		t.Error("Updated not filled")
	}
	wantFatal(t, s.SetCheckpoint(ctx, Checkpoint{}))
	wantFatal(t, s.SetCheckpoint(ctx, Checkpoint{Source: "http://z/", RunID: 999}))
}

// TestProgress: marks are upserted by key, kept per source and resource
// set, and cleared by the set's checkpoint alone.
func TestProgress(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)
	steps := []struct {
		name string
		b    Batch
		want map[string]map[string]string // by source + " " + set
	}{
		{"first marks", Batch{Progress: []Progress{{Source: "a", ResourceSet: "s1", Key: "w1", Value: "p1", RunID: run}, {Source: "a", ResourceSet: "s2", Key: "w1", Value: "q"}, {Source: "b", ResourceSet: "s1", Key: "w1", Value: "r"}}},
			map[string]map[string]string{"a s1": {"w1": "p1"}, "a s2": {"w1": "q"}, "b s1": {"w1": "r"}}},
		{"a later mark replaces its key", Batch{Progress: []Progress{{Source: "a", ResourceSet: "s1", Key: "w1", Value: "p2"}, {Source: "a", ResourceSet: "s1", Key: "w2", Value: "done"}}},
			map[string]map[string]string{"a s1": {"w1": "p2", "w2": "done"}, "a s2": {"w1": "q"}, "b s1": {"w1": "r"}}},
		{"a checkpoint clears its set's marks", Batch{Checkpoint: &Checkpoint{Source: "a", ResourceSet: "s1"}},
			map[string]map[string]string{"a s1": {}, "a s2": {"w1": "q"}, "b s1": {"w1": "r"}}},
	}
	for _, st := range steps {
		if err := s.Commit(ctx, st.b); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for k, want := range st.want {
			src, set, _ := strings.Cut(k, " ")
			got, err := s.Progress(ctx, src, set)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("%s: %s = %v, %v; want %v", st.name, k, got, err, want)
			}
		}
	}
	wantFatal(t, s.Commit(ctx, Batch{Progress: []Progress{{Source: "a", ResourceSet: "s1"}}}))
}

func TestCommitAtomic(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run := mustRun(t, s)

	good := func(prefix string, n int) []Resource {
		var rs []Resource
		for i := range n {
			rs = append(rs, Resource{URI: fmt.Sprintf("%s/%d", prefix, i), Length: int64(i), Outcome: OutcomeWritten, RunID: run})
		}
		return rs
	}
	cp := &Checkpoint{Source: "http://x/", Next: time.Now(), RunID: run}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	tests := []struct {
		name string
		ctx  context.Context
		b    Batch
	}{
		{"unknown run in a failure (foreign key)", ctx, Batch{
			Resources:  good("a", 50),
			Failures:   []Failure{{RunID: run, Error: "ok"}, {RunID: 424242, Error: "bad"}, {RunID: run, Error: "ok"}},
			Changes:    []ChangeRecord{{URI: "a/1", Change: ChangeCreated, RunID: run}},
			Checkpoint: cp,
		}},
		{"invalid resource in the middle", ctx, Batch{
			Resources:  append(append(good("b", 20), Resource{URI: "b/bad", Length: -5, Outcome: OutcomeWritten}), good("b2", 20)...),
			Checkpoint: cp,
		}},
		{"unknown run in a resource (foreign key)", ctx, Batch{
			Resources: append(good("c", 10), Resource{URI: "c/bad", Length: 1, Outcome: OutcomeWritten, RunID: 31337}),
		}},
		{"bad change after resources and failures", ctx, Batch{
			Resources: good("d", 10),
			Failures:  []Failure{{RunID: run, Error: "x"}},
			Changes:   []ChangeRecord{{URI: "d/1", Change: ChangeCreated}, {URI: "d/2", Change: "renamed"}},
		}},
		{"checkpoint with an unknown run last", ctx, Batch{
			Resources:  good("e", 10),
			Changes:    []ChangeRecord{{URI: "e/1", Change: ChangeUpdated}},
			Checkpoint: &Checkpoint{Source: "http://x/", RunID: 777},
		}},
		{"cancelled context", cancelled, Batch{Resources: good("f", 10), Checkpoint: cp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantFatal(t, s.Commit(tt.ctx, tt.b))
			assertEmpty(t, s, run)
		})
	}

	// The store still works, and a good batch lands whole.
	b := Batch{
		Resources:  good("ok", 100),
		Failures:   []Failure{{RunID: run, Error: "x"}},
		Changes:    []ChangeRecord{{URI: "ok/1", Change: ChangeCreated, RunID: run}},
		Checkpoint: cp,
	}
	if err := s.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	n, _ := s.CountResources(ctx, "", true)
	fs, _, _ := s.Failures(ctx, run, 1000)
	cs, _ := s.Changes(ctx, run)
	_, ok, _ := s.Checkpoint(ctx, cp.Source, "")
	if n != 100 || len(fs) != 1 || len(cs) != 1 || !ok {
		t.Errorf("after a good batch: %d resources, %d failures, %d changes, checkpoint %v", n, len(fs), len(cs), ok)
	}
	if err := s.Commit(ctx, Batch{}); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

// assertEmpty checks that nothing but run exists in the store.
func assertEmpty(t *testing.T, s *Store, run int64) {
	t.Helper()
	ctx := context.Background()
	var n int64
	for _, table := range []string{"resources", "failures", "changes", "checkpoints"} {
		if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%s has %d rows after a failed commit", table, n)
		}
	}
	if _, err := s.Run(ctx, run); err != nil {
		t.Errorf("run lost: %v", err)
	}
}

func TestWalkResources(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	var rs []Resource
	for _, u := range []string{"c", "a", "d", "b"} {
		rs = append(rs, Resource{URI: u, Length: -1, Outcome: OutcomeWritten, Deleted: u == "d"})
	}
	if err := s.PutResources(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := s.WalkResources(ctx, "", func(r Resource) error {
		seen = append(seen, r.URI)
		// Lookups from inside the walk work.
		if _, ok, err := s.Resource(ctx, r.Source, r.URI); !ok || err != nil {
			return fmt.Errorf("lookup inside walk: %v, %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a", "b", "c", "d"}) {
		t.Errorf("walk order %v", seen)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.WalkResources(ctx, "", func(Resource) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("walk returned %v after %d calls, want stop after 1", err, calls)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	wantFatal(t, s.WalkResources(cancelled, "", func(Resource) error { return nil }))
	_, _, err = s.Resource(cancelled, "", "a")
	wantFatal(t, err)
}

func TestMarkInterrupted(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id, err := s.BeginRun(ctx, Run{Mode: "baseline", Source: "http://x/"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.MarkInterrupted(ctx, time.Now(), "", nil)
	if err != nil || n != 1 {
		t.Fatalf("marked %d (%v)", n, err)
	}
	r, err := s.Run(ctx, id)
	if err != nil || r.Status != StatusInterrupted || r.Finished.IsZero() {
		t.Fatalf("run %+v %v", r, err)
	}
}

func TestDocuments(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	const u = "http://example.org/resourcedump.xml"
	if _, ok, err := s.Document(ctx, u); ok || err != nil {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	for _, d := range []Document{
		{URL: u, ETag: `"1"`, Body: []byte("<urlset/>")},
		{URL: u, LastModified: "Tue, 15 Nov 1994 12:45:26 GMT", Body: []byte("<urlset>2</urlset>")},
		{URL: u, Body: []byte{}},
	} {
		if err := s.PutDocument(ctx, d); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Document(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if d.ETag == "" && d.LastModified == "" {
			if ok {
				t.Errorf("a document without validators is kept: %+v", got)
			}
			continue
		}
		if !ok || got.ETag != d.ETag || got.LastModified != d.LastModified || string(got.Body) != string(d.Body) {
			t.Errorf("got %+v %v, want %+v", got, ok, d)
		}
	}
	if err := s.PutDocument(ctx, Document{URL: u, ETag: `"big"`, Body: make([]byte, MaxDocumentCopy+1)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Document(ctx, u); ok {
		t.Error("a document over MaxDocumentCopy is kept")
	}
}

// TestResourcesBelongToSources: two sources may publish the same URI; each
// keeps its own record, deliveries and repair.
func TestResourcesBelongToSources(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	a := Resource{URI: "http://x/same", Source: "http://a/", Length: 1, Outcome: OutcomeWritten}
	b := Resource{URI: "http://x/same", Source: "http://b/", Length: 2, Outcome: OutcomeWritten}
	if err := s.Commit(ctx, Batch{
		Resources:  []Resource{a, b},
		Deliveries: []Delivery{{Source: a.Source, URI: a.URI, Sink: "s1", Length: 1}, {Source: b.Source, URI: b.URI, Sink: "s1", Length: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []Resource{a, b} {
		got, ok, err := s.Resource(ctx, want.Source, want.URI)
		if err != nil || !ok || got.Length != want.Length {
			t.Errorf("Resource(%s, %s) = %+v, %v, %v; want length %d", want.Source, want.URI, got, ok, err, want.Length)
		}
		if n, err := s.CountResources(ctx, want.Source, false); err != nil || n != 1 {
			t.Errorf("CountResources(%s) = %d, %v; want 1", want.Source, n, err)
		}
		if ds, err := s.Deliveries(ctx, want.Source, want.URI); err != nil || len(ds) != 1 || ds[0].Length != want.Length {
			t.Errorf("Deliveries(%s) = %+v, %v", want.Source, ds, err)
		}
	}
	if n, err := s.CountResources(ctx, "", false); err != nil || n != 2 {
		t.Errorf("CountResources(all) = %d, %v; want 2", n, err)
	}
	if err := s.Commit(ctx, Batch{Delivered: []Key{{Source: a.Source, URI: a.URI}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.ForgetResources(ctx, a.Source, []string{a.URI}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Resource(ctx, a.Source, a.URI); ok {
		t.Error("ForgetResources(a) left a's record")
	}
	if _, ok, _ := s.Resource(ctx, b.Source, b.URI); !ok {
		t.Error("ForgetResources(a) removed b's record")
	}
	if ds, _ := s.Deliveries(ctx, b.Source, b.URI); len(ds) != 1 {
		t.Errorf("b's deliveries = %+v, want one (only a's were delivered and forgotten)", ds)
	}
	var walked []string
	if err := s.WalkResources(ctx, "", func(r Resource) error { walked = append(walked, r.Source); return nil }); err != nil || !slices.Equal(walked, []string{"http://b/"}) {
		t.Errorf("WalkResources = %v, %v", walked, err)
	}
}

// TestMigrateToSourceKeys: a state file written before resources were keyed
// by source opens, and keeps every resource and delivery under the source
// it was recorded with.
func TestMigrateToSourceKeys(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		fmt.Sprintf("PRAGMA application_id = %d", applicationID),
		"CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)",
	}
	for v, m := range migrations()[:7] {
		stmts = append(stmts, m, fmt.Sprintf("INSERT INTO schema_version VALUES (%d, '2026-01-01T00:00:00Z')", v+1))
	}
	stmts = append(stmts,
		`INSERT INTO runs (id, mode, source, status) VALUES (1, 'baseline', 'http://a/', 'ok')`,
		`INSERT INTO resources (uri, source, resource_set, length, md5, type, package, outcome, deleted, run_id, etag, last_modified, verified)
			VALUES ('http://a/1', 'http://a/', 'http://a/cl', 5, '1e0d5cb8ef6ba40c99b14c0237be735e', 'text/plain', 'http://a/p.zip', 'written', 0, 1, 'e', '', 'hash')`,
		`INSERT INTO deliveries (uri, sink, length) VALUES ('http://a/1', 'sink1', 5)`,
	)
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil { // made private, as this version wants it
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open a version-7 file: %v", err)
	}
	defer s.Close()
	got, ok, err := s.Resource(ctx, "http://a/", "http://a/1")
	if err != nil || !ok || got.Length != 5 || got.Package != "http://a/p.zip" || got.Verified != "hash" || got.RunID != 1 || got.Hashes.MD5 == nil {
		t.Errorf("migrated resource = %+v, %v, %v", got, ok, err)
	}
	if ds, err := s.Deliveries(ctx, "http://a/", "http://a/1"); err != nil || len(ds) != 1 || ds[0].Sink != "sink1" {
		t.Errorf("migrated deliveries = %+v, %v", ds, err)
	}
	if _, ok, _ := s.Resource(ctx, "http://b/", "http://a/1"); ok {
		t.Error("another source sees the migrated resource")
	}
}
