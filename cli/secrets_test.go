package cli

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// TestCredentialsInSourceURL: a source URL with credentials
// (http://user:password@host/) authenticates every request to the source's
// origin, and its password is in nothing rsharvest shows or writes — the
// output and log, the report, the state file, the harvest log, a
// publication — nor sent to another origin.
func TestCredentialsInSourceURL(t *testing.T) {
	const secret = "hunter2pw"
	var mu sync.Mutex
	var unauthenticated []string
	srv := generatedSource(t, bench.GenOptions{Resources: 30, Packages: 2, Seed: 3, MeanSize: 512}, bench.ServeOptions{
		Wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != secret {
					mu.Lock()
					unauthenticated = append(unauthenticated, r.URL.Path)
					mu.Unlock()
					w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
					http.Error(w, "who are you", http.StatusUnauthorized)
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	source := strings.Replace(srv.URL, "http://", "http://alice:"+secret+"@", 1)
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	report := filepath.Join(dir, "report.json")
	code, out, stderr := run(t, "sync", "--source", source, "--sink", "fs:"+filepath.Join(dir, "mirror"), "--state", db,
		"--report", report, "--progress", "log", "--log-level", "debug")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if len(unauthenticated) > 0 {
		t.Errorf("requests without the credentials: %v", unauthenticated)
	}
	shown := out + stderr
	code, o, e := run(t, "log", "--state", db)
	shown += o + e
	code2, o2, e2 := run(t, "ls", "--state", db, "--source", source)
	if code2 != ExitOK || !strings.Contains(o2, "/") {
		t.Errorf("ls --source with the credentials: exit %d\n%s%s", code2, o2, e2)
	}
	pub := filepath.Join(dir, "pub")
	if code3, o3, e3 := run(t, "publish", "--state", db, "--out", pub, "--base-url", "http://127.0.0.1:1/pub"); code3 != ExitOK {
		t.Fatalf("publish: exit %d\n%s%s", code3, o3, e3)
	}
	if code != ExitOK {
		t.Fatalf("log: exit %d", code)
	}
	// A site of the source: its harvest, the registry's listing and the
	// site's definition as shown. (The registry keeps the site's source as
	// given, password included: a secret at rest in a file only its owner
	// reads, or given as ${ENV_NAME}.)
	sitesDB := filepath.Join(t.TempDir(), "sites.db")
	for _, args := range [][]string{
		{"sites", "add", "s", "--source", source, "--sink", "fs:" + filepath.Join(dir, "mirror2"), "--every", "1d", "--state", sitesDB},
		{"run", "s", "--state", sitesDB},
		{"sites", "list", "--state", sitesDB},
		{"sites", "show", "s", "--state", sitesDB},
		{"log", "--state", sitesDB, "--site", "s"},
	} {
		c, o, e := run(t, args...)
		if c != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, c, o, e)
		}
		shown += o + e
	}
	if strings.Contains(shown, secret) {
		t.Errorf("the password was shown:\n%s", shown)
	}
	if !strings.Contains(shown, "alice@") {
		t.Errorf("the source is not named by its identity (its URL without the password):\n%s", shown)
	}
	// Nothing written holds it: the report, the state file (and its
	// journal), the publication.
	for _, root := range []string{dir} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(p, "mirror") {
				return err
			}
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), secret) {
				t.Errorf("%s holds the password", p)
			}
			return nil
		})
	}
}

// TestReadableStateRefused: every command refuses a state file other
// users may read — saying how to make it private — unless given
// --allow-readable-state, which opens it with a warning.
func TestReadableStateRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	if code, out, stderr := run(t, "sites", "add", "a", "--source", "http://127.0.0.1:1/", "--sink", "fs:"+filepath.Join(dir, "m"), "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	fi, err := os.Stat(db)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a new state file: %v, mode %04o; want 0600", err, fi.Mode().Perm())
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sites", "list", "--state", db},
		{"log", "--state", db},
		{"sync", "--source", "http://127.0.0.1:1/", "--sink", "fs:" + filepath.Join(dir, "m"), "--state", db},
		{"publish", "--state", db, "--out", filepath.Join(dir, "pub"), "--base-url", "http://127.0.0.1:1/"},
	} {
		code, out, stderr := run(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "chmod 600") || !strings.Contains(stderr, "--allow-readable-state") {
			t.Errorf("%v on a state file of mode 0644: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	code, out, stderr := run(t, "sites", "list", "--state", db, "--allow-readable-state")
	if code != ExitOK || !strings.Contains(stderr, "readable by other users") || !strings.Contains(out, "a") {
		t.Errorf("sites list --allow-readable-state: exit %d\n%s%s", code, out, stderr)
	}
}

// TestSecretsFromTheEnvironment: a site's header value and sink spec may
// name environment variables (${NAME}), resolved at harvest time and never
// stored; a variable not set is an error naming it.
func TestSecretsFromTheEnvironment(t *testing.T) {
	hl := &headerLog{values: map[string][]string{}}
	srv := generatedSource(t, bench.GenOptions{Resources: 10, Packages: 1, Seed: 4, MeanSize: 256}, bench.ServeOptions{Wrap: hl.wrap("X-Api-Key")})
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	t.Setenv("RSH_TEST_KEY", "env-secret-1")
	t.Setenv("RSH_TEST_DIR", filepath.Join(dir, "mirror"))
	if code, out, stderr := run(t, "sites", "add", "e", "--source", srv.URL, "--sink", "fs:${RSH_TEST_DIR}", "--header", "X-Api-Key: ${RSH_TEST_KEY}",
		"--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := run(t, "run", "e", "--state", db); code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, stderr)
	}
	hl.mu.Lock()
	for p, vs := range hl.values {
		for _, v := range vs {
			if !strings.HasPrefix(v, "env-secret-1|") {
				t.Errorf("%s: X-Api-Key|agent %q", p, v)
			}
		}
	}
	hl.mu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "mirror")); err != nil {
		t.Errorf("the sink named by ${RSH_TEST_DIR}: %v", err)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "env-secret-1") || !strings.Contains(string(b), "${RSH_TEST_KEY}") {
		t.Error("the registry stores the value, not the reference ${RSH_TEST_KEY}")
	}
	os.Unsetenv("RSH_TEST_KEY")
	code, out, stderr := run(t, "run", "e", "--state", db)
	if code == ExitOK || !strings.Contains(out+stderr, "${RSH_TEST_KEY} is not set") {
		t.Errorf("run without the variable: exit %d\n%s%s", code, out, stderr)
	}
}

// TestLookCommandsApplyTheAddressRule: the commands that look at a
// source (discover, oai …) keep to the address rule as a harvest does: a
// source on loopback may not lead them to a private or metadata address,
// refused before connecting, unless --allow-private-addresses.
func TestLookCommandsApplyTheAddressRule(t *testing.T) {
	const ns = `xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/resourcesync":
			fmt.Fprintf(w, `<urlset %s><rs:md capability="description"/><url><loc>http://10.255.255.1/cl.xml</loc></url></urlset>`, ns)
		case "/oai":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	}))
	defer srv.Close()
	for _, args := range [][]string{
		{"discover", srv.URL, "--retries", "0"},
		{"oai", "identify", srv.URL + "/oai", "--retries", "0"},
		{"oai", "sets", srv.URL + "/oai", "--retries", "0"},
		{"oai", "record", srv.URL + "/oai", "oai:x:1", "--retries", "0"},
	} {
		code, out, stderr := run(t, args...)
		if !strings.Contains(out+stderr, "address refused") || !strings.Contains(out+stderr, "--allow-private-addresses") {
			t.Errorf("%v: exit %d; want the address refused\n%s%s", args, code, out, stderr)
		}
	}
}

// TestHeadersStayWithTheSource: a --header goes to the source's origin
// only — not to the host of a resource its list names — unless that
// origin is named with --header-origin.
func TestHeadersStayWithTheSource(t *testing.T) {
	const ns = `xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"`
	var mu sync.Mutex
	seen := map[string][]string{} // server → X-Api-Key values
	record := func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = append(seen[name], r.Header.Get("X-Api-Key"))
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	other := httptest.NewServer(record("other", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a resource elsewhere")
	})))
	defer other.Close()
	var src *httptest.Server
	src = httptest.NewServer(record("source", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/rl.xml":
			fmt.Fprintf(w, `<urlset %s><rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/><url><loc>%s/here</loc></url><url><loc>%s/there</loc></url></urlset>`, ns, src.URL, other.URL)
		default:
			io.WriteString(w, "a resource of the source")
		}
	})))
	defer src.Close()
	for _, tc := range []struct {
		extra []string
		other string // what the other host saw
	}{
		{nil, ""},
		{[]string{"--header-origin", other.URL}, "k"},
	} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		dir := t.TempDir()
		args := append([]string{"baseline", "--source", src.URL + "/rl.xml", "--sink", "fs:" + filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"),
			"--header", "X-Api-Key: k"}, tc.extra...)
		if code, out, stderr := run(t, args...); code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		mu.Lock()
		for _, v := range seen["source"] {
			if v != "k" {
				t.Errorf("%v: the source was asked without the header", tc.extra)
			}
		}
		if got := seen["other"]; len(got) != 1 || got[0] != tc.other {
			t.Errorf("%v: the other host saw X-Api-Key %q, want %q", tc.extra, got, tc.other)
		}
		mu.Unlock()
	}
}

// TestTrickleCutOff: a list that sends a few bytes at a time is cut off
// by --low-speed-limit and --low-speed-time, a temporary failure, instead
// of holding the run.
func TestTrickleCutOff(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for {
			if _, err := io.WriteString(w, " "); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	code, out, stderr := run(t, "baseline", "--source", srv.URL+"/rl.xml", "--sink", "fs:"+filepath.Join(dir, "m"), "--state", filepath.Join(dir, "s.db"),
		"--retries", "0", "--low-speed-limit", "10000", "--low-speed-time", "200ms")
	if code == ExitOK || !strings.Contains(out+stderr, "too slow") || !strings.Contains(out+stderr, "--low-speed-limit") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}
