package cli

import (
	"context"
	"database/sql"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	fssink "github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/state"
)

// TestOAIPMH: baseline then sync of an OAI-PMH repository from the
// command line, its protocol found by asking Identify (or forced, with a
// config file): the mirror holds exactly the repository's live records,
// each one's metadata a standalone document.
func TestOAIPMH(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   func(dir string) []string
		packed bool // the fs sink's packed layout
	}{
		{name: "detected", args: func(string) []string { return nil }},
		{name: "forced in the config file", args: func(dir string) []string {
			cfg := filepath.Join(dir, "rsharvest.yaml")
			if err := os.WriteFile(cfg, []byte("protocol: oai-pmh\nmetadata_prefix: oai_dc\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"--config", cfg}
		}},
		{name: "packed layout", args: func(string) []string { return nil }, packed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := bench.NewOAIRepository(bench.OAIOptions{Records: 40, PageSize: 9, RootNamespaces: true, ControlChars: true})
			mux := http.NewServeMux()
			mux.Handle("/oai/request", repo)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			dir := t.TempDir()
			mirror := filepath.Join(dir, "mirror")
			spec, held := "fs:"+mirror, heldBodies
			if tc.packed {
				spec, held = spec+"?layout=packed", heldPacked
			}
			args := append([]string{"--source", srv.URL + "/oai/request", "--sink", spec, "--state", filepath.Join(dir, "state.db"), "--progress", "none"}, tc.args(dir)...)
			for i, mode := range []string{"baseline", "sync"} {
				if i > 0 {
					repo.Advance()
				}
				code, out, stderr := run(t, append([]string{mode}, args...)...)
				if code != ExitOK {
					t.Fatalf("%s: exit %d\n%s\n%s", mode, code, out, stderr)
				}
				if i > 0 && !strings.Contains(out, "incremental of") {
					t.Errorf("sync after a baseline did not run incremental:\n%s", out)
				}
				held := held(t, mirror)
				live := 0
				for _, rec := range repo.Records() {
					body, ok := held[rec.Identifier]
					if rec.Deleted {
						if ok {
							t.Errorf("%s: %s deleted, still held", mode, rec.Identifier)
						}
						continue
					}
					live++
					title := strings.NewReplacer("\x01", "\uFFFD", "\x1f", "\uFFFD").Replace(rec.Title)
					if !strings.HasPrefix(body, "<?xml") || !strings.Contains(body, `xmlns:dc="`+bench.DCNamespace+`"`) || !strings.Contains(body, "<dc:title>"+title+"</dc:title>") {
						t.Errorf("%s: %s holds %q", mode, rec.Identifier, body)
					}
				}
				if len(held) != live {
					t.Errorf("%s: %d files, %d live records", mode, len(held), live)
				}
			}
			// The mirror and the state agree, read back through the sink.
			if code, out, stderr := run(t, append([]string{"audit"}, args...)...); code != ExitOK {
				t.Errorf("audit: exit %d\n%s\n%s", code, out, stderr)
			}
		})
	}
}

// heldPacked returns what the packed layout's database in mirror holds (URI
// → body), read apart from the sink as the sqlite3 tool reads it.
func heldPacked(t testing.TB, mirror string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(mirror, fssink.PackedFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SELECT uri, body FROM records")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	held := map[string]string{}
	for rows.Next() {
		var uri, body string
		if err := rows.Scan(&uri, &body); err != nil {
			t.Fatal(err)
		}
		held[uri] = body
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if files, err := filepath.Glob(filepath.Join(mirror, "*", "*")); err != nil || len(files) > 0 {
		t.Errorf("the packed layout wrote files %v (%v)", files, err)
	}
	return held
}

// TestOAISets: --set, repeated, harvests each set as a resource set of
// its own, with its own checkpoint, and sync then catches up every set;
// a ResourceSync source takes one set at most.
func TestOAISets(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 60, PageSize: 7})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	dir := t.TempDir()
	mirror, db := filepath.Join(dir, "mirror"), filepath.Join(dir, "state.db")
	args := []string{"--source", srv.URL + "/oai", "--set", "parity:odd", "--set", "tens", "--sink", "fs:" + mirror, "--state", db, "--progress", "none"}
	inSets := func(rec bench.OAIRecord) bool {
		return slices.ContainsFunc(rec.Sets, func(s string) bool { return s == "parity:odd" || s == "tens" })
	}
	for i, mode := range []string{"baseline", "sync"} {
		if i > 0 {
			repo.Advance()
		}
		if code, out, stderr := run(t, append([]string{mode}, args...)...); code != ExitOK {
			t.Fatalf("%s: exit %d\n%s\n%s", mode, code, out, stderr)
		}
		want := map[string]bool{}
		for _, rec := range repo.Records() {
			if inSets(rec) && !rec.Deleted {
				want[rec.Identifier] = true
			}
		}
		got := map[string]bool{}
		err := filepath.WalkDir(mirror, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(p, ".rsharvest") {
				return err
			}
			rel, _ := filepath.Rel(mirror, p)
			uri, err := fssink.Decode(filepath.ToSlash(rel))
			got[uri] = true
			return err
		})
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("%s: the mirror holds %d records (%v), want the %d live ones of the two sets", mode, len(got), err, len(want))
		}
	}
	s, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, set := range []string{"parity:odd", "tens"} {
		cp, ok, err := s.Checkpoint(t.Context(), srv.URL+"/oai", oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, set))
		if err != nil || !ok || !cp.Next.Equal(repo.Now()) {
			t.Errorf("set %s: checkpoint %+v, %v, %v; want next %v", set, cp, ok, err, repo.Now())
		}
	}
	rs := httptest.NewServer(http.NotFoundHandler())
	defer rs.Close()
	code, out, stderr := run(t, "baseline", "--source", rs.URL+"/capabilitylist.xml", "--protocol", "resourcesync", "--set", "a", "--set", "b", "--sink", "fs:"+mirror, "--state", filepath.Join(dir, "rs.db"))
	if code != ExitUsage || !strings.Contains(out+stderr, "one resource set at a time") {
		t.Errorf("two sets of a ResourceSync source: exit %d\n%s%s", code, out, stderr)
	}
}

// busyServer serves repo on 127.0.0.1, but answers the requests busy
// says to refuse with 503 and a Retry-After of an hour.
func busyServer(repo *bench.OAIRepository, busy func(url.Values) bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if busy(req.URL.Query()) {
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "come back later", http.StatusServiceUnavailable)
			return
		}
		repo.ServeHTTP(w, req)
	}))
	return srv
}

// TestOAILongRetryAfter: a server that asks, partway, to come back in an
// hour ends the run at once, partial, with no checkpoint set; the next run
// resumes where that one stopped and completes it.
func TestOAILongRetryAfter(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 50, PageSize: 10})
	var (
		mu    sync.Mutex
		pages int
		busy  = true
	)
	srv := busyServer(repo, func(q url.Values) bool {
		if q.Get("verb") != "ListRecords" {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		pages++
		return busy && pages > 2
	})
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	args := []string{"baseline", "--source", srv.URL + "/oai", "--concurrency", "1", "--sink", "fs:" + filepath.Join(dir, "mirror"), "--state", db, "--progress", "none"}
	code, out, stderr := run(t, args...)
	if code != ExitPartial || !strings.Contains(out+stderr, "Retry-After 1h0m0s") {
		t.Fatalf("first run: exit %d, want %d\n%s%s", code, ExitPartial, out, stderr)
	}
	set := oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, "")
	s, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Checkpoint(t.Context(), srv.URL+"/oai", set); ok || err != nil {
		t.Errorf("a checkpoint was set by a partial run (%v)", err)
	}
	s.Close()
	mu.Lock()
	busy, pages = false, 0
	mu.Unlock()
	if code, out, stderr := run(t, args...); code != ExitOK {
		t.Fatalf("second run: exit %d\n%s%s", code, out, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	// The 3 pages the first run did not get, and one list of what
	// changed since it began.
	if pages != 4 {
		t.Errorf("the second run asked for %d pages, want 4", pages)
	}
}

// TestOAIHoldAtFailedWindow: a sync whose later date windows fail holds
// the checkpoint at the start of the earliest window that failed: past
// what was harvested in full, never past what was not.
func TestOAIHoldAtFailedWindow(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 200, PageSize: 10})
	var (
		mu      sync.Mutex
		failing time.Time // list requests from this datestamp on fail
		failed  []time.Time
	)
	srv := busyServer(repo, func(q url.Values) bool {
		from, _ := time.Parse(time.RFC3339, q.Get("from"))
		mu.Lock()
		defer mu.Unlock()
		refuse := q.Get("verb") == "ListRecords" && !failing.IsZero() && !from.Before(failing)
		if refuse {
			failed = append(failed, from)
		}
		return refuse
	})
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	args := []string{"--source", srv.URL + "/oai", "--concurrency", "2", "--sink", "fs:" + filepath.Join(dir, "mirror"), "--state", db, "--progress", "none"}
	if code, out, stderr := run(t, append([]string{"baseline"}, args...)...); code != ExitOK {
		t.Fatalf("baseline: exit %d\n%s%s", code, out, stderr)
	}
	start := repo.Now()
	repo.Advance()
	mu.Lock()
	failing = start.Add(10 * 24 * time.Hour) // the windows after the first days of the range
	mu.Unlock()
	if code, out, stderr := run(t, append([]string{"sync"}, args...)...); code != ExitPartial {
		t.Fatalf("sync: exit %d, want %d\n%s%s", code, ExitPartial, out, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failed) == 0 {
		t.Fatal("no window failed")
	}
	s, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cp, ok, err := s.Checkpoint(t.Context(), srv.URL+"/oai", oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, ""))
	if want := slices.MinFunc(failed, func(a, b time.Time) int { return a.Compare(b) }); err != nil || !ok || !cp.Next.Equal(want) {
		t.Errorf("checkpoint %v (%v, %v), want held at %v, the start of the earliest window that failed (after %v)", cp.Next, ok, err, want, start)
	}
}

// TestOAICommands: rsharvest oai identify|formats|sets print what a
// repository says, as text or JSON; a URL that is no repository is a
// source error.
func TestOAICommands(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 5, DayGranularity: true})
	srv := httptest.NewServer(repo)
	defer srv.Close()
	notOAI := httptest.NewServer(http.NotFoundHandler())
	defer notOAI.Close()
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"identify", srv.URL}, ExitOK, []string{"granularity:      YYYY-MM-DD", "deleted records:  persistent", "admin@rsharvest.example"}},
		{[]string{"identify", srv.URL, "--json"}, ExitOK, []string{`"granularity": "YYYY-MM-DD"`, `"base_url": "` + srv.URL}},
		{[]string{"formats", srv.URL}, ExitOK, []string{"PREFIX", "oai_dc  " + bench.OAIDCNamespace}},
		{[]string{"sets", srv.URL, "--json"}, ExitOK, []string{`"spec": "parity:even"`, `"name": "Multiples of ten"`}},
		{[]string{"sets", srv.URL}, ExitOK, []string{"parity:odd   Odd"}},
		{[]string{"identify", notOAI.URL + "/oai", "--retries", "0"}, ExitSource, []string{"404"}},
		{[]string{"record", srv.URL, "oai:rsharvest.example:0000003"}, ExitOK, []string{"identifier: oai:rsharvest.example:0000003", "sets:       parity:odd", `<?xml version="1.0" encoding="UTF-8"?>`, "<dc:title>Record 3, version 0</dc:title>"}},
		{[]string{"record", srv.URL, "oai:rsharvest.example:0000003", "--json"}, ExitOK, []string{`"identifier": "oai:rsharvest.example:0000003"`, `"metadata": "<?xml version=\"1.0\"`}},
		{[]string{"record", srv.URL, "oai:nope", "--retries", "0"}, ExitSource, []string{"idDoesNotExist"}},
		{[]string{"record", srv.URL}, ExitUsage, []string{"takes 2 arguments"}},
		{[]string{"identify", "ftp://x"}, ExitUsage, []string{"not an absolute http(s) URL"}},
	} {
		code, out, stderr := run(t, append([]string{"oai"}, tc.args...)...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(out+stderr, w) {
				t.Errorf("%v: output lacks %q:\n%s%s", tc.args, w, out, stderr)
			}
		}
	}
}

// TestServeOAI: rsharvest serve --oai serves a synthetic repository, with
// server habits and injected transient faults, that baseline harvests
// whole; a habit it does not know is a usage error.
func TestServeOAI(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--oai", "--oai-records", "60", "--oai-page-size", "7", "--oai-quirks", "root-namespaces,gzip,empty-last-token",
			"--fault-rate", "0.3", "--faults", "transient", "--fault-seed", "3", "--fault-retry-after", "-1s", "--fault-stall", "0s"}, &out, &errb)
	}()
	base := servedURL(&out, `at (http://127\.0\.0\.1:[0-9]+/oai)`)
	if base == "" {
		t.Fatalf("serve did not start: %s %s", out.String(), errb.String())
	}
	dir := t.TempDir()
	code, sout, serr := run(t, "baseline", "--source", base, "--sink", "fs:"+filepath.Join(dir, "mirror"), "--state", filepath.Join(dir, "state.db"), "--progress", "none", "--retries", "10")
	if code != ExitOK || !strings.Contains(sout, "60 written") {
		t.Errorf("baseline: exit %d\n%s\n%s", code, sout, serr)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("serve: exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "faults injected") || strings.Contains(out.String(), "faults injected: 0 faults") {
		t.Errorf("serve printed %q", out.String())
	}
	var o, e syncBuffer
	if code := Main(t.Context(), []string{"serve", "--oai", "--oai-quirks", "gremlins"}, &o, &e); code != ExitUsage || !strings.Contains(e.String(), "gremlins") {
		t.Errorf("serve --oai-quirks gremlins: exit %d, %s", code, e.String())
	}
}

// TestOAIFirstBaselineCounts: a first baseline of a repository that
// reports deleted records deletes nothing (nothing was held), and says
// so; the bytes downloaded are the pages'.
func TestOAIFirstBaselineCounts(t *testing.T) {
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: 30, PageSize: 10})
	repo.Advance() // every 7th record deleted
	srv := httptest.NewServer(repo)
	defer srv.Close()
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", srv.URL, "--protocol", "oai-pmh", "--sink", "fs:"+filepath.Join(dir, "m"),
		"--state", filepath.Join(dir, "s.db"), "--progress", "none")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if !regexp.MustCompile(`resources: \d+ written, 0 deleted, [1-9]\d* unchanged`).MatchString(out) || strings.Contains(out, " 0 downloaded") {
		t.Errorf("the summary:\n%s", out)
	}
}
