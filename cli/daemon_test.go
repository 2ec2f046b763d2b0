package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/internal/testbin"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// siteStatus returns the last status of site name in the registry of db
// ("" before its first harvest).
func siteStatus(t testing.TB, db, name string) string {
	t.Helper()
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := site.Registry{Store: st}.Site(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.LastStatus
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// stopDaemon stops the daemon whose Main runs with cancel's context and
// says its exit code on done, and wants it to end cleanly.
func stopDaemon(t *testing.T, cancel context.CancelFunc, done <-chan int, out, errb *syncBuffer) {
	t.Helper()
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("daemon: exit %d\n%s%s", code, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop")
	}
}

// TestDaemon: the daemon harvests the due sites of the registry (one that
// cannot be reached does not keep it from the others, and is tried again
// with backoff), a second daemon on
// the same state file is refused, and a stop (the context's end, as
// SIGTERM) ends it cleanly, logged.
func TestDaemon(t *testing.T) {
	oai := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 30, PageSize: 7}))
	defer oai.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	registry := filepath.Join(dir, "sites.yaml")
	err := os.WriteFile(registry, []byte(`sites:
  - {name: broken, source: "http://127.0.0.1:1/x.xml", retries: 0, sinks: [fs:broken], schedule: every 1d}
  - {name: oai, source: "`+oai.URL+`/oai", protocol: oai-pmh, sinks: [fs:oai], schedule: every 1d}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, "sites", "apply", registry, "--state", db); code != ExitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	t.Setenv("RSHARVEST_STATUS_TOKEN", "t0k3n")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := "http://" + l.Addr().String()
	l.Close()
	go func() {
		done <- Main(ctx, []string{"daemon", "--state", db, "--tick", "200ms", "--listen", strings.TrimPrefix(page, "http://"),
			"--publish-out", filepath.Join(dir, "pub"), "--publish-base-url", "http://127.0.0.1:1/pub"}, &out, &errb)
	}()
	waitFor(t, "site oai harvested", func() bool { return siteStatus(t, db, "oai") == "ok" })
	// Republished after the harvest (issue 16).
	waitFor(t, "site oai republished", func() bool { return publishedResources(t, filepath.Join(dir, "pub")) == 30 })
	// The status page: /healthz open, the rest behind the token.
	for _, tc := range []struct {
		path, token string
		code        int
		want        string
	}{
		{"/healthz", "", 200, "ok"},
		{"/", "", 401, ""},
		{"/", "t0k3n", 200, `data-site="oai"`},
		{"/metrics", "t0k3n", 200, `rsharvest_site_runs_total{site="oai",status="ok"} 1`},
	} {
		req, _ := http.NewRequest(http.MethodGet, page+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d, want %d with %q\n%s", tc.path, resp.StatusCode, tc.code, tc.want, body)
		}
	}
	// The unreachable site is tried again, with backoff (River's).
	waitFor(t, "site broken tried twice", func() bool {
		_, log, _ := run(t, "log", "--state", db, "--site", "broken")
		return strings.Count(log, "broken  harvest ended") >= 2
	})
	if n := countFiles(t, filepath.Join(dir, "oai")); n != 30 {
		t.Errorf("site oai: %d files, want 30", n)
	}
	if code, _, stderr := run(t, "daemon", "--state", db); code != ExitUsage || !strings.Contains(stderr, "in use") {
		t.Errorf("a second daemon: exit %d\n%s", code, stderr)
	}
	stopDaemon(t, cancel, done, &out, &errb)
	_, log, _ := run(t, "log", "--state", db)
	for _, want := range []string{"harvester started  rsharvest daemon", "oai     harvest ended", "harvester stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestDaemonKillResume: a daemon killed with SIGKILL in the middle of a
// harvest, then started again, takes the harvest up where it stopped —
// at the page after the last one committed, never from zero — and
// finishes it: the mirror holds every record. Its jobs in the state file,
// or in PostgreSQL (--jobs-db), where the killed daemon's session ends
// and with it its hold on the job schema.
func TestDaemonKillResume(t *testing.T) {
	bin := crashBuildBinary(t)
	pg := startPostgres(t)
	for _, tc := range []struct {
		name  string
		state string // "": a file
		args  []string
	}{
		{"state file", "", nil},
		{"postgres", "", []string{"--jobs-db", pg}},
		{"state in postgres", pgDatabase(t, pg, "killresume"), nil}, // the jobs beside it
	} {
		t.Run(tc.name, func(t *testing.T) { daemonKillResume(t, bin, tc.state, tc.args) })
	}
}

// pgDatabase creates the database name on the PostgreSQL server at
// server and returns its URL.
func pgDatabase(t testing.TB, server, name string) string {
	t.Helper()
	db, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return strings.Replace(server, "/postgres?", "/"+name+"?", 1)
}

// startPostgres starts a PostgreSQL server on 127.0.0.1 for the test
// (internal/testbin), stopped at its end, and returns its URL.
func startPostgres(t testing.TB) string {
	t.Helper()
	url, stop, err := testbin.Postgres(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}

// restartablePostgres starts a PostgreSQL server on 127.0.0.1 for the
// test, stopped at its end, with a database name of its own, and returns
// the server (to restart it) and the database's URL.
func restartablePostgres(t *testing.T, name string) (*testbin.PostgresServer, string) {
	t.Helper()
	server, err := testbin.StartPostgres(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	return server, pgDatabase(t, server.URL, name)
}

func daemonKillResume(t *testing.T, bin, db string, daemonArgs []string) {
	const records, pageSize, holdAt = 400, 20, 8
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: pageSize})
	srv := newHeldOAI(t, repo, holdAt)
	dir := t.TempDir()
	mirror := filepath.Join(dir, "mirror")
	mirrorSpec := "fs:" + mirror
	if db == "" {
		db = filepath.Join(dir, "state.db")
	} else {
		mirrorSpec += "?shared=1" // harvested from any machine
	}
	if code, out, stderr := run(t, "sites", "add", "oai", "--source", srv.URL+"/oai", "--protocol", "oai-pmh", "--sink", mirrorSpec, "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, append([]string{"daemon", "--state", db, "--tick", "200ms", "--log-level", "warn", "--listen", ""}, daemonArgs...)...)
		cmd.Stderr = os.Stderr // warnings only
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := start()
	set := "metadataPrefix=oai_dc"
	waitFor(t, "a page held and a progress mark committed", func() bool {
		return srv.held() && len(readProgress(t, db, srv.URL+"/oai", set)) > 0
	})
	_ = cmd.Process.Kill() // SIGKILL
	_ = cmd.Wait()
	srv.free()
	first := len(srv.reset())

	cmd = start()
	waitFor(t, "the harvest taken up and finished", func() bool { return siteStatus(t, db, "oai") == "ok" })
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	pages := len(srv.reset())
	// The harvest after the restart took only what the killed one had
	// not committed: nothing it held came again.
	st, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(t.Context(), 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	var rep runreport.Report
	if err := json.Unmarshal(runs[0].Report, &rep); err != nil {
		t.Fatal(err)
	}
	if got := rep.Resources.Written + rep.Resources.Unchanged; got >= records || rep.Resources.Written == 0 {
		t.Errorf("after the restart: %d written, %d unchanged of %d: not resumed", rep.Resources.Written, rep.Resources.Unchanged, records)
	}
	if n := countFiles(t, mirror); n != records {
		t.Errorf("the mirror holds %d records, want %d", n, records)
	}
	t.Logf("before the kill: %d list requests; after the restart: %d, %d records written, %d unchanged", first, pages, rep.Resources.Written, rep.Resources.Unchanged)
}

// TestDaemonPostgres: with --jobs-db the jobs live in PostgreSQL, in the
// schema --jobs-schema names; a second daemon on the same schema is
// refused (exit 2) even from another state file, while one on another
// schema of the same database works beside the first.
func TestDaemonPostgres(t *testing.T) {
	pg := startPostgres(t)
	oai := httptest.NewServer(bench.NewOAIRepository(bench.OAIOptions{Records: 12, PageSize: 5}))
	defer oai.Close()
	dir := t.TempDir()
	type daemonRun struct {
		db, mirror string
		cancel     context.CancelFunc
		done       chan int
		out, errb  *syncBuffer
	}
	start := func(name string, args ...string) *daemonRun {
		d := &daemonRun{db: filepath.Join(dir, name+".db"), mirror: filepath.Join(dir, name), done: make(chan int, 1), out: &syncBuffer{}, errb: &syncBuffer{}}
		if code, out, stderr := run(t, "sites", "add", "oai", "--source", oai.URL+"/oai", "--protocol", "oai-pmh", "--sink", "fs:"+d.mirror, "--every", "1d", "--state", d.db); code != ExitOK {
			t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
		}
		var ctx context.Context
		ctx, d.cancel = context.WithCancel(t.Context())
		go func() {
			d.done <- Main(ctx, append([]string{"daemon", "--state", d.db, "--tick", "200ms", "--listen", "", "--jobs-db", pg}, args...), d.out, d.errb)
		}()
		return d
	}
	stop := func(d *daemonRun) {
		d.cancel()
		select {
		case code := <-d.done:
			if code != ExitOK {
				t.Errorf("daemon: exit %d\n%s%s", code, d.out.String(), d.errb.String())
			}
		case <-time.After(time.Minute):
			t.Fatal("the daemon did not stop")
		}
	}
	first := start("first")
	waitFor(t, "the first registry's site harvested", func() bool { return siteStatus(t, first.db, "oai") == "ok" })

	// Same schema, another state file: refused while the first runs.
	code, _, stderr := run(t, "daemon", "--state", filepath.Join(dir, "third.db"), "--listen", "", "--jobs-db", pg)
	if code != ExitUsage || !strings.Contains(stderr, "job schema in use by another daemon: schema rsharvest") {
		t.Errorf("a second daemon on the schema: exit %d\n%s", code, stderr)
	}
	// A schema River cannot name, a database that does not answer: clear
	// errors, at once.
	for _, args := range [][]string{{"--jobs-db", pg, "--jobs-schema", "no-dashes"}, {"--jobs-db", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5"}} {
		code, _, stderr := run(t, append([]string{"daemon", "--state", filepath.Join(dir, "third.db"), "--listen", ""}, args...)...)
		if code == ExitOK || !strings.Contains(stderr, "--jobs-") {
			t.Errorf("daemon %q: exit %d\n%s", args, code, stderr)
		}
	}
	// Another schema of the same database: works beside it.
	second := start("second", "--jobs-schema", "registry_two")
	waitFor(t, "the second registry's site harvested", func() bool { return siteStatus(t, second.db, "oai") == "ok" })
	stop(second)
	stop(first)
	for _, d := range []*daemonRun{first, second} {
		if n := countFiles(t, d.mirror); n != 12 {
			t.Errorf("%s: %d files, want 12", d.mirror, n)
		}
	}
	// The jobs are in PostgreSQL, each registry's in its schema.
	conn, err := pgx.Connect(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, schema := range []string{"rsharvest", "registry_two"} {
		var n int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".river_job WHERE kind = 'rsharvest_harvest' AND state = 'completed'").Scan(&n); err != nil || n != 1 {
			t.Errorf("schema %s: %d completed harvest jobs (%v), want 1", schema, n, err)
		}
	}
}
