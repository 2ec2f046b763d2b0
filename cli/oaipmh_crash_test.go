package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/source/oaipmh"
	"github.com/rsharvest/rsharvest/state"
)

// TestOAIKillResume: a baseline of an OAI-PMH repository killed with
// SIGKILL partway resumes, in the next run, at the page after the last
// one whose records were committed (by the resumption token the progress
// mark holds), never from zero, and the mirror then holds every record.
func TestOAIKillResume(t *testing.T) {
	bin := crashBuildBinary(t)
	for _, concurrency := range []string{"1", "4"} {
		t.Run("concurrency "+concurrency, func(t *testing.T) { oaiKillResume(t, bin, concurrency) })
	}
}

func oaiKillResume(t *testing.T, bin, concurrency string) {
	const records, pageSize, killAt = 600, 20, 16
	repo := bench.NewOAIRepository(bench.OAIOptions{Records: records, PageSize: pageSize})
	var (
		mu       sync.Mutex
		requests []url.Values // ListRecords requests, of the current run
		release  = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if q := req.URL.Query(); q.Get("verb") == "ListRecords" {
			mu.Lock()
			requests = append(requests, q)
			n := len(requests)
			mu.Unlock()
			select {
			case <-release:
			default:
				if n >= killAt {
					// Hold this page, and those after it, until the
					// child is killed.
					select {
					case <-release:
					case <-req.Context().Done():
					}
					return
				}
			}
		}
		repo.ServeHTTP(w, req)
	}))
	defer srv.Close()
	dir := t.TempDir()
	base, db, mirror := srv.URL+"/oai", filepath.Join(dir, "state.db"), filepath.Join(dir, "mirror")
	child := func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "baseline", "--source", base, "--protocol", "oai-pmh", "--sink", "fs:"+mirror,
			"--state", db, "--progress", "none", "--log-level", "warn", "--concurrency", concurrency)
		cmd.WaitDelay = 5 * time.Second
		return cmd
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// Run 1: killed once the server holds its pages and a mark covers some.
	cmd := child(ctx)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	set := oaipmh.ResourceSet(oaipmh.DefaultMetadataPrefix, "")
	for marked := false; !marked; {
		select {
		case <-ctx.Done():
			t.Fatalf("no progress mark recorded before the deadline\n%s", out.String())
		case err := <-exited:
			t.Fatalf("the first run ended before it was killed: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		mu.Lock()
		held := len(requests) >= killAt
		mu.Unlock()
		marked = held && len(readProgress(t, db, base, set)) > 0
	}
	_ = cmd.Process.Kill() // SIGKILL
	<-exited
	close(release)
	type listMark struct {
		Token string
		Done  bool
	}
	var open []string // the tokens of the lists left partway
	done := 0
	for _, v := range readProgress(t, db, base, set) {
		var m listMark
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			t.Fatal(err)
		}
		if m.Done {
			done++
		} else {
			open = append(open, m.Token)
		}
	}
	mu.Lock()
	first := len(requests)
	requests = nil
	mu.Unlock()

	// Run 2: resumes.
	cmd = child(ctx)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, b)
	}
	mu.Lock()
	defer mu.Unlock()
	asked := map[string]bool{}
	for _, q := range requests {
		asked[q.Get("resumptionToken")] = true
	}
	for _, tok := range open {
		if !asked[tok] {
			t.Errorf("the second run did not resume the list at token %q", tok)
		}
	}
	if concurrency == "1" && (len(requests) == 0 || requests[0].Get("resumptionToken") == "") {
		t.Errorf("the second run's first list request is %v, want a resumption token", requests[0])
	}
	pages := records / pageSize
	if len(requests) >= pages {
		t.Errorf("the second run asked for %d pages of %d", len(requests), pages)
	}
	t.Logf("run 1: %d list requests before the kill, %d lists left partway, %d done; run 2: %d (%d pages in all)", first, len(open), done, len(requests), pages)
	n := 0
	err := filepath.WalkDir(mirror, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) != ".rsharvest-tmp" {
			n++
		}
		return err
	})
	if err != nil || n != records {
		t.Errorf("the mirror holds %d files (%v), want %d", n, err, records)
	}
	if m := readProgress(t, db, base, set); len(m) != 0 {
		t.Errorf("marks left after the harvest succeeded: %v", m)
	}
}

// readProgress reads the progress marks of a source's resource set from
// the state file, while a run may hold it.
func readProgress(t *testing.T, db, source, set string) map[string]string {
	t.Helper()
	if _, err := os.Stat(db); err != nil {
		return nil
	}
	s, err := state.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Progress(t.Context(), source, set)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
