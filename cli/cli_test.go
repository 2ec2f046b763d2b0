package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/testdata/hostile"
)

func run(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// headerLog records, for every request, the header named.
type headerLog struct {
	mu     sync.Mutex
	values map[string][]string // path → values seen
}

func (h *headerLog) wrap(name string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.mu.Lock()
			h.values[r.URL.Path] = append(h.values[r.URL.Path], r.Header.Get(name)+"|"+r.Header.Get("User-Agent"))
			h.mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
}

// generatedSource generates a source of gen (in a temporary directory) and
// serves it on loopback with so until the test ends.
func generatedSource(t *testing.T, gen bench.GenOptions, so bench.ServeOptions) *bench.Server {
	t.Helper()
	gen.Dir = t.TempDir()
	if _, err := bench.Generate(t.Context(), gen); err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(t.Context(), gen.Dir, "127.0.0.1:0", so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// changingSource serves, on 127.0.0.1 until the test ends, a source
// generated with gen at the address it is served from, its first round of
// changes published: one whose changes the test publishes later
// (Handler.Publish). It returns gen as generated (its Dir and Base set).
func changingSource(t *testing.T, gen bench.GenOptions, so bench.ServeOptions) (*bench.Server, bench.GenOptions) {
	t.Helper()
	gen.Dir = t.TempDir()
	srv, err := bench.Serve(t.Context(), gen.Dir, "127.0.0.1:0", so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	gen.Base = srv.URL
	if _, err := bench.Generate(t.Context(), gen); err != nil {
		t.Fatal(err)
	}
	srv.Handler.Publish(0)
	return srv, gen
}

// refusing are the serve options of an origin that can be told to stop
// serving: once refuse is set it answers every request 404, counting them
// in refused (when not nil).
func refusing(refuse *atomic.Bool, refused *atomic.Int64) bench.ServeOptions {
	return bench.ServeOptions{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refuse.Load() {
				if refused != nil {
					refused.Add(1)
				}
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	}}
}

func TestBaselineCommand(t *testing.T) {
	hl := &headerLog{values: map[string][]string{}}
	srv := generatedSource(t, bench.GenOptions{Resources: 200, Packages: 3, Seed: 5, MeanSize: 2 << 10}, bench.ServeOptions{Wrap: hl.wrap("X-Api-Key")})
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	code, out, stderr := run(t, "baseline", "--source", srv.URL, "--sink", "fs:"+filepath.Join(dir, "mirror"),
		"--state", filepath.Join(dir, "state.db"), "--report", report, "--header", "X-Api-Key: s3cret", "--progress", "log", "--rate", "1000")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if strings.Contains(stderr, "s3cret") || strings.Contains(out, "s3cret") {
		t.Error("a header value (credential) appeared in the output")
	}
	var rep map[string]any
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mode", "source", "started", "finished", "packages", "resources", "bytes", "failures"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	if rep["resources"].(map[string]any)["written"].(float64) != 200 {
		t.Errorf("report: %s", b)
	}
	// The extra header and the User-Agent went with every request, packages included.
	hl.mu.Lock()
	defer hl.mu.Unlock()
	sawPackage := false
	for p, vs := range hl.values {
		sawPackage = sawPackage || strings.HasSuffix(p, ".zip")
		for _, v := range vs {
			if v != "s3cret|"+UserAgent() {
				t.Errorf("%s: request with header|agent %q", p, v)
			}
		}
	}
	if !sawPackage {
		t.Error("no package request seen")
	}
}

func TestExitCodes(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_ACCESS_KEY_ID", "rsharvest-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
	src := t.TempDir()
	hs, err := hostile.Build(src)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bench.Serve(ctx, src, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	sinkFlag := "fs:" + filepath.Join(dir, "mirror")
	state := filepath.Join(dir, "state.db")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"partial", []string{"baseline", "--source", strings.Replace(hs.Dump, hostile.Base, srv.URL, 1), "--sink", sinkFlag, "--state", state, "--retries", "0"}, ExitPartial},
		{"no source", []string{"baseline", "--sink", sinkFlag}, ExitUsage},
		{"no sink", []string{"baseline", "--source", srv.URL}, ExitUsage},
		{"sink unreachable", []string{"baseline", "--source", srv.URL, "--sink", "s3://bucket/p?endpoint=127.0.0.1:1&secure=false", "--state", state}, ExitUsage},
		{"es unreachable", []string{"baseline", "--source", srv.URL, "--sink", "es:http://user:hunter2@127.0.0.1:1/idx", "--state", state}, ExitUsage},
		{"unknown sink", []string{"baseline", "--source", srv.URL, "--sink", "ftp:x", "--state", state}, ExitUsage},
		{"bad header", []string{"baseline", "--source", srv.URL, "--sink", sinkFlag, "--header", "no colon"}, ExitUsage},
		{"unknown flag", []string{"baseline", "--bogus"}, ExitUsage},
		{"unknown command", []string{"frobnicate"}, ExitUsage},
		{"state not writable", []string{"baseline", "--source", srv.URL, "--sink", sinkFlag, "--state", filepath.Join(dir, "no", "such", "dir", "s.db")}, ExitUsage},
		{"from after until", []string{"incremental", "--source", srv.URL, "--sink", sinkFlag, "--state", state, "--from", "2020-01-02", "--until", "2020-01-01"}, ExitUsage},
		{"bad from", []string{"incremental", "--source", srv.URL, "--sink", sinkFlag, "--state", state, "--from", "yesterday"}, ExitUsage},
		{"source missing", []string{"baseline", "--source", srv.URL + "nothing.xml", "--sink", sinkFlag, "--state", state, "--retries", "0"}, ExitSource},
		{"source not resourcesync", []string{"baseline", "--source", srv.URL + "packages/truncated.zip", "--sink", sinkFlag, "--state", state}, ExitSource},
		{"source document over --max-document-size", []string{"baseline", "--source", strings.Replace(hs.Dump, hostile.Base, srv.URL, 1), "--sink", sinkFlag, "--state", state, "--max-document-size", "100"}, ExitSource},
		{"bad --max-document-size", []string{"baseline", "--source", srv.URL, "--sink", sinkFlag, "--state", state, "--max-document-size", "0"}, ExitUsage},
		{"discover, bad --max-document-size", []string{"discover", srv.URL, "--max-document-size", "-2"}, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.Handler.Stats().Requests
			code, out, errb := run(t, tt.args...)
			if code != tt.want {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tt.want, out, errb)
			}
			if strings.Contains(out+errb, "hunter2") {
				t.Errorf("a credential appeared in the output: %s", errb)
			}
			if strings.HasSuffix(tt.name, "unreachable") && srv.Handler.Stats().Requests != before {
				t.Errorf("the source was read although a sink was unreachable")
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 50, Packages: 1, Seed: 9, MeanSize: 1 << 10}, bench.ServeOptions{})
	dir := t.TempDir()
	// Seed 000's key works as written there; relative paths are the file's.
	cfg := filepath.Join(dir, "rsharvest.yaml")
	os.WriteFile(cfg, []byte("capability_list_url: "+srv.URL+"capabilitylist.xml\nsinks: [\"fs:mirror\"]\nstate: state.db\nworkers: 2\nprogress: none\n"), 0o644)
	code, out, errb := run(t, "baseline", "--config", cfg)
	if code != ExitOK || !strings.Contains(out, "50 written") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		t.Errorf("state not next to the config file: %v", err)
	}
	// Flags override the file.
	code, out, errb = run(t, "baseline", "--config", cfg, "--state", filepath.Join(dir, "other.db"))
	if code != ExitOK || !strings.Contains(out, "50 written") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.db")); err != nil {
		t.Errorf("--state did not override the file: %v", err)
	}
	// An unknown key is an error naming its line.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("source: "+srv.URL+"\nsinks: [\"fs:mirror\"]\nconcurency: 3\n"), 0o644)
	code, _, errb = run(t, "baseline", "--config", bad)
	if code != ExitUsage || !strings.Contains(errb, ":3:") || !strings.Contains(errb, "concurency") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

// TestSyncWithoutChanges: sync on a source that publishes no Change Dump or
// Change List runs a baseline the first time, and compares with the
// snapshot again afterwards (nothing rewritten).
func TestSyncWithoutChanges(t *testing.T) {
	srv := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 1, Seed: 3, MeanSize: 1 << 10}, bench.ServeOptions{})
	dir := t.TempDir()
	args := []string{"sync", "--source", srv.URL, "--sink", "fs:" + filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"), "--progress", "none"}
	for i, want := range []string{"30 written", "30 unchanged"} {
		code, out, errb := run(t, args...)
		if code != ExitOK || !strings.Contains(out, want) {
			t.Fatalf("sync %d: exit %d\n%s\n%s", i+1, code, out, errb)
		}
	}
}

// TestDemoAgain: the demo run a second time (its source served on another
// port) downloads and rewrites nothing, as the README says.
func TestDemoAgain(t *testing.T) {
	t.Chdir(t.TempDir())
	for i := range 2 {
		if code, out, errs := run(t, "demo", "--resources", "200"); code != 0 {
			t.Fatalf("demo run %d: exit %d\n%s\n%s", i+1, code, out, errs)
		}
	}
	for _, name := range []string{"baseline.json", "incremental.json"} {
		b, err := os.ReadFile(filepath.Join(demoDir, name))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Status    string
			Resources struct{ Written, Deleted int64 }
			Bytes     struct{ Downloaded, Written int64 }
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Status != "ok" || rep.Resources.Written != 0 || rep.Resources.Deleted != 0 || rep.Bytes.Downloaded != 0 || rep.Bytes.Written != 0 {
			t.Errorf("%s of the second demo run: %s", name, b)
		}
	}
}

// servedURL waits up to 2 s for what a serve command prints to match
// pattern and returns its first group, "" if it never does.
func servedURL(out *syncBuffer, pattern string) string {
	re := regexp.MustCompile(pattern)
	for range 200 {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ""
}

// TestBaselineProducers: packages written as Python's zipfile and Java's
// ZipOutputStream write them (zlib at levels 1 and 6; data descriptors and
// the manifest last for Java) are harvested whole and verified.
func TestBaselineProducers(t *testing.T) {
	for _, producer := range []string{bench.ProducerPython1, bench.ProducerPython6, bench.ProducerJava} {
		t.Run(producer, func(t *testing.T) {
			srv := generatedSource(t, bench.GenOptions{Resources: 80, Packages: 2, Seed: 6, MeanSize: 4 << 10, Producer: producer}, bench.ServeOptions{})
			dir := t.TempDir()
			code, out, stderr := run(t, "baseline", "--source", srv.URL, "--sink", "fs:"+filepath.Join(dir, "mirror"),
				"--state", filepath.Join(dir, "state.db"), "--progress", "none", "--log-level", "warn")
			if code != ExitOK || !strings.Contains(out, "80 written") {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
		})
	}
}

// TestUsageErrors: a source that is not an http(s) URL, and two sinks in
// one --sink, are usage errors (exit 2) before anything is harvested.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no scheme", []string{"--source", "127.0.0.1:18431", "--sink", "fs:" + dir}, "want an http(s) URL, such as http://127.0.0.1:18431"},
		{"a typo'd scheme", []string{"--source", "htp://example.org/", "--sink", "fs:" + dir}, "want an http(s) URL"},
		{"two sinks in one", []string{"--source", "http://127.0.0.1:1/", "--sink", "fs:./m,s3://x"}, "names two sinks"},
		{"a bandwidth that is none", []string{"--source", "http://127.0.0.1:1/", "--sink", "fs:" + dir, "--bwlimit", "fast"}, "--bwlimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := run(t, append([]string{"baseline", "--state", filepath.Join(dir, "s.db"), "--progress", "none"}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(out, "resources:") {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, ExitUsage, tc.want, out, stderr)
			}
		})
	}
}

// TestUnreachableSource: a source whose host refuses connections fails the
// run at its first request — no retry, no discovery of other URLs of the
// same host — with one line that says so.
func TestUnreachableSource(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ln.Close()
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", url, "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"), "--progress", "none")
	if code != ExitSource || strings.Count(stderr, "cannot be reached") != 1 || strings.Contains(stderr, "retry") || strings.Contains(stderr, "robots.txt") {
		t.Fatalf("exit %d, want %d and one line saying the host cannot be reached:\n%s%s", code, ExitSource, out, stderr)
	}
}

// TestInterruptedRun: a run stopped while it downloads — a package, or
// the resources a list names — is "interrupted" everywhere — its summary,
// its report, the harvest log — exits 130, says that running the same
// command again resumes, and reports no resource as failed.
func TestInterruptedRun(t *testing.T) {
	for _, tc := range []struct {
		name, held string
		args       []string
	}{
		{"a package", ".zip", nil},
		{"the resources of a list", "/resources/", []string{"--prefer", "list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{}, 1)
			hold := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, tc.held) {
						select {
						case started <- struct{}{}:
						default:
						}
						<-r.Context().Done() // it never comes
						return
					}
					h.ServeHTTP(w, r)
				})
			}
			origin := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 1, Seed: 3, MeanSize: 1 << 10, NoOddNames: true, WriteResources: true}, bench.ServeOptions{Wrap: hold})
			dir := t.TempDir()
			db, rp := filepath.Join(dir, "s.db"), filepath.Join(dir, "report.json")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() {
				select {
				case <-started:
					cancel()
				case <-ctx.Done():
				}
			}()
			var out, errb bytes.Buffer
			code := Main(ctx, append([]string{"baseline", "--source", origin.URL, "--sink", "fs:" + filepath.Join(dir, "m"), "--state", db, "--progress", "none", "--report", rp}, tc.args...), &out, &errb)
			if code != ExitInterrupted || !strings.Contains(out.String(), ": interrupted in") || !strings.Contains(errb.String(), "interrupted: run the same command again to resume") ||
				strings.Contains(errb.String(), "context canceled") || strings.Contains(errb.String(), "resource failed") || !strings.Contains(out.String(), " 0 failed") {
				t.Fatalf("exit %d, want %d, interrupted and how to resume, no failure:\n%s%s", code, ExitInterrupted, out.String(), errb.String())
			}
			b, err := os.ReadFile(rp)
			if err != nil || !strings.Contains(string(b), `"status": "interrupted"`) {
				t.Errorf("report: %s (%v)", b, err)
			}
			if code, logOut, _ := run(t, "log", "--state", db); code != ExitOK || !strings.Contains(logOut, "run 1: interrupted") || strings.Contains(logOut, ": failed") {
				t.Errorf("log: exit %d:\n%s", code, logOut)
			}
		})
	}
}

// TestHelpNamesEverything: the root help and --source name OAI-PMH beside
// ResourceSync, and --sink every kind of sink.
func TestHelpNamesEverything(t *testing.T) {
	_, root, _ := run(t, "--help")
	_, baseline, _ := run(t, "baseline", "--help")
	_, oai, _ := run(t, "--help")
	if !strings.Contains(oai, "one record (record)") {
		t.Errorf("the root help's line for oai leaves out record:\n%s", oai)
	}
	for _, want := range []struct{ in, text string }{
		{root, "OAI-PMH"}, {root, "ResourceSync"},
		{baseline, "OAI-PMH repository's base URL"},
		{baseline, "fs:DIR"}, {baseline, "s3://"}, {baseline, "es:http://"}, {baseline, "solr:http://"},
	} {
		if !strings.Contains(want.in, want.text) {
			t.Errorf("help lacks %q", want.text)
		}
	}
}

// TestPositionalSource: a URL given as an argument is a usage error that
// says to give it with --source; a misspelt command is suggested.
func TestPositionalSource(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sync", "http://example.org/"}, "rsharvest sync --source http://example.org/ --sink fs:DIR"},
		{[]string{"http://example.org/"}, "rsharvest sync --source http://example.org/"},
		{[]string{"basline"}, `did you mean baseline?`},
	} {
		code, _, stderr := run(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, want %d with %q:\n%s", tc.args, code, ExitUsage, tc.want, stderr)
		}
	}
}

// TestQuiet: -q logs no info records and shows no progress; the summary is
// still printed.
func TestQuiet(t *testing.T) {
	origin := generatedSource(t, bench.GenOptions{Resources: 10, Packages: 1, Seed: 7, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	code, out, stderr := run(t, "sync", "-q", "--source", origin.URL, "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"), "--progress", "log")
	if code != ExitOK || stderr != "" || !strings.Contains(out, "10 written") {
		t.Fatalf("exit %d, want a summary and nothing on stderr:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// TestLs: ls lists what the state holds of a source or a site — length,
// sha-256, lastmod, URI — as text or a JSON array.
func TestLs(t *testing.T) {
	origin := generatedSource(t, bench.GenOptions{Resources: 12, Packages: 1, Seed: 9, MeanSize: 1 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	if code, out, stderr := run(t, "sites", "add", "c", "--source", origin.URL, "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "c", "--state", db, "-q"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr := run(t, "ls", "--site", "c", "--state", db)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 12 || len(strings.Fields(lines[0])) != 5 {
		t.Fatalf("ls: exit %d, %d lines:\n%s%s", code, len(lines), out, stderr)
	}
	code, out, stderr = run(t, "ls", "--source", origin.URL, "--json", "--state", db)
	var es []struct {
		URI    string `json:"uri"`
		Length int64  `json:"length"`
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(out), &es); code != ExitOK || err != nil || len(es) != 12 || len(es[0].SHA256) != 64 || es[0].Length <= 0 {
		t.Fatalf("ls --json: exit %d, %v:\n%s%s", code, err, out, stderr)
	}
	// cat gives back what ls lists.
	code, body, stderr := run(t, "cat", es[0].URI, "--site", "c", "--state", db)
	if sum := sha256.Sum256([]byte(body)); code != ExitOK || hex.EncodeToString(sum[:]) != es[0].SHA256 {
		t.Fatalf("cat %s: exit %d, %d bytes that do not match:\n%s", es[0].URI, code, len(body), stderr)
	}
	if code, _, stderr := run(t, "cat", "http://nowhere.example/x", "--sink", "fs:"+filepath.Join(dir, "m")); code != ExitPartial || !strings.Contains(stderr, "no sink holds") {
		t.Errorf("cat of a URI not held: exit %d:\n%s", code, stderr)
	}
}

// TestBwLimit: --bwlimit caps what a harvest receives: every byte arrives,
// and the report counts the waits the cap imposed.
func TestBwLimit(t *testing.T) {
	origin := generatedSource(t, bench.GenOptions{Resources: 20, Packages: 1, Seed: 8, MeanSize: 8 << 10, NoOddNames: true}, bench.ServeOptions{})
	dir := t.TempDir()
	rp := filepath.Join(dir, "r.json")
	code, out, stderr := run(t, "sync", "-q", "--bwlimit", "256k", "--source", origin.URL, "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"), "--report", rp)
	if code != ExitOK || !strings.Contains(out, "20 written") {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	b, _ := os.ReadFile(rp)
	var rep struct {
		Fetch struct {
			Throttled int64 `json:"throttled"`
		} `json:"fetch"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Fetch.Throttled == 0 {
		t.Errorf("the report counts no wait the cap imposed (%v):\n%s", err, b)
	}
}
