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
	srv := newHeldOAI(t, repo, killAt)
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
		marked = srv.held() && len(readProgress(t, db, base, set)) > 0
	}
	_ = cmd.Process.Kill() // SIGKILL
	<-exited
	srv.free()
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
	first := len(srv.reset())

	// Run 2: resumes.
	cmd = child(ctx)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, b)
	}
	requests := srv.reset()
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
	if _, err := os.Stat(db); err != nil && !state.IsPostgres(db) {
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

// heldOAI serves an OAI-PMH repository on 127.0.0.1 and holds every
// ListRecords request from the holdAt-th on, unanswered, until free is
// called (a harvest caught in the middle, to be killed); it records the
// ListRecords requests.
type heldOAI struct {
	*httptest.Server
	holdAt   int
	mu       sync.Mutex
	requests []url.Values
	release  chan struct{}
}

func newHeldOAI(t *testing.T, repo *bench.OAIRepository, holdAt int) *heldOAI {
	h := &heldOAI{holdAt: holdAt, release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if q := req.URL.Query(); q.Get("verb") == "ListRecords" {
			h.mu.Lock()
			h.requests = append(h.requests, q)
			n := len(h.requests)
			h.mu.Unlock()
			select {
			case <-h.release:
			default:
				if n >= h.holdAt {
					select {
					case <-h.release:
					case <-req.Context().Done():
					}
					return
				}
			}
		}
		repo.ServeHTTP(w, req)
	}))
	t.Cleanup(h.Close)
	return h
}

// held reports whether a request is being held.
func (h *heldOAI) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests) >= h.holdAt
}

// free answers every request from now on.
func (h *heldOAI) free() { close(h.release) }

// reset returns the requests recorded, and forgets them.
func (h *heldOAI) reset() []url.Values {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.requests
	h.requests = nil
	return r
}
