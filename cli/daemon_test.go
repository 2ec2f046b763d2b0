package cli

import (
	"context"
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

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// siteStatus returns the last status of site name in the registry of db
// ("" before its first harvest).
func siteStatus(t *testing.T, db, name string) string {
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
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
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
		done <- Main(ctx, []string{"daemon", "--state", db, "--tick", "200ms", "--listen", strings.TrimPrefix(page, "http://")}, &out, &errb)
	}()
	waitFor(t, "site oai harvested", func() bool { return siteStatus(t, db, "oai") == "ok" })
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
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("daemon: exit %d\n%s%s", code, out.String(), errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not stop")
	}
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
// finishes it: the mirror holds every record.
func TestDaemonKillResume(t *testing.T) {
	bin := crashBuildBinary(t)
	const records, pageSize, holdAt = 400, 20, 8
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: pageSize})
	srv := newHeldOAI(t, repo, holdAt)
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	mirror := filepath.Join(dir, "mirror")
	if code, out, stderr := run(t, "sites", "add", "oai", "--source", srv.URL+"/oai", "--protocol", "oai-pmh", "--sink", "fs:"+mirror, "--every", "1d", "--state", db); code != ExitOK {
		t.Fatalf("sites add: exit %d\n%s%s", code, out, stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "daemon", "--state", db, "--tick", "200ms", "--log-level", "warn", "--listen", "")
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
	var rep pipeline.Report
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
