package es

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/internal/testbin"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/sinktest"
)

// zincVersion must match ZINCSEARCH_VERSION in scripts/servers.sh.
const zincVersion = "v0.4.10"

// The credentials of the test server's first administrator.
const (
	zincUser     = "admin"
	zincPassword = "Zinc-test-pw1"
	// zincMaxDoc is the server's ZINC_MAX_DOCUMENT_SIZE: the longest bulk
	// line it takes (decimal megabytes).
	zincMaxDoc = 12_000_000
)

// zincServer is one ZincSearch process, shared by the package's tests.
type zincServer struct {
	url    string // base URL of the Elasticsearch API, …/es
	dir    string // its data and log
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	next   atomic.Int64  // numbers the indexes of the tests
}

// zinc starts the package's ZincSearch on first use; TestMain stops it.
var zinc = sync.OnceValues(startZinc)

func TestMain(m *testing.M) {
	code := m.Run()
	if z, err := zinc(); err == nil {
		z.stop()
	}
	os.Exit(code)
}

// zincBinary finds the ZincSearch binary: $RSHARVEST_ZINCSEARCH, else the
// one scripts/servers.sh builds and caches (see testbin.Path).
func zincBinary() (string, error) {
	return testbin.Path(context.Background(), "RSHARVEST_ZINCSEARCH", "zincsearch", zincVersion)
}

func startZinc() (*zincServer, error) {
	bin, err := zincBinary()
	if err != nil {
		return nil, fmt.Errorf("no ZincSearch binary (set RSHARVEST_ZINCSEARCH, or run scripts/servers.sh zincsearch): %w", err)
	}
	dir, err := os.MkdirTemp("", "rsharvest-zinc-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "zincsearch.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	z := &zincServer{url: fmt.Sprintf("http://127.0.0.1:%d/es", port), dir: dir, exited: make(chan struct{})}
	z.cmd = exec.Command(bin)
	z.cmd.Dir = dir
	z.cmd.Env = append(os.Environ(),
		"ZINC_SENTRY=false",
		"ZINC_TELEMETRY=false",
		"ZINC_PROFILER=false",
		"ZINC_FIRST_ADMIN_USER="+zincUser,
		"ZINC_FIRST_ADMIN_PASSWORD="+zincPassword,
		"ZINC_DATA_PATH="+filepath.Join(dir, "data"),
		"ZINC_SERVER_ADDRESS=127.0.0.1",
		fmt.Sprintf("ZINC_SERVER_PORT=%d", port),
		"ZINC_WAL_SYNC_INTERVAL=10ms",
		fmt.Sprintf("ZINC_MAX_DOCUMENT_SIZE=%d", zincMaxDoc),
		"GIN_MODE=release",
	)
	z.cmd.Stdout, z.cmd.Stderr = logFile, logFile
	setPdeathsig(z.cmd)
	start := time.Now()
	if err := z.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	var waitErr error
	go func() {
		waitErr = z.cmd.Wait()
		close(z.exited)
	}()
	failed := func(format string, a ...any) (*zincServer, error) {
		z.stop()
		logs, _ := os.ReadFile(logPath)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %s; its output:\n%s", bin, fmt.Sprintf(format, a...), logs)
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	for {
		if resp, err := http.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(os.Stderr, "sink/es: ZincSearch %s up on port %d in %v\n", zincVersion, port, time.Since(start).Round(time.Millisecond))
				return z, nil
			}
		}
		select {
		case <-z.exited:
			return failed("exited at start (%v)", waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(start) > 30*time.Second {
			return failed("no answer on port %d in 30 s", port)
		}
	}
}

// stop kills the server and waits for it to exit.
func (z *zincServer) stop() {
	_ = z.cmd.Process.Kill()
	<-z.exited
	os.RemoveAll(z.dir)
}

// newZinc opens a sink on two new indexes of the test ZincSearch.
func newZinc(t *testing.T, opts Options) *ES {
	t.Helper()
	z, err := zinc()
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	opts.URL = z.url
	opts.Username, opts.Password = zincUser, zincPassword
	opts.Index = fmt.Sprintf("t%d", z.next.Add(1))
	if opts.RetryWait == 0 {
		opts.RetryWait = 10 * time.Millisecond
	}
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.Flavor() != FlavorZinc {
		t.Fatalf("flavour %v, want zincsearch", s.Flavor())
	}
	return s
}

func TestConformanceZinc(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return newZinc(t, Options{StoreBody: true, Concurrency: 8})
	})
}

func TestZincOpenRefused(t *testing.T) {
	z, err := zinc()
	if err != nil {
		t.Fatalf("ZincSearch: %v", err)
	}
	spec := strings.Replace(z.url, "http://", "http://"+zincUser+":not-"+zincPassword+"@", 1) + "/refused"
	_, err = Open(t.Context(), spec)
	if !errclass.IsFatal(err) || strings.Contains(err.Error(), zincPassword) {
		t.Errorf("Open with a wrong password = %v, want fatal without the password", err)
	}
	t.Setenv("ES_USERNAME", zincUser)
	t.Setenv("ES_PASSWORD", zincPassword)
	s, err := Open(t.Context(), z.url+"/fromenv?batch=2")
	if err != nil {
		t.Fatalf("Open with ES_USERNAME/ES_PASSWORD: %v", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestZincOversizeDocument has ZincSearch refuse one document (longer than
// its ZINC_MAX_DOCUMENT_SIZE) of a bulk request: the others are indexed.
func TestZincOversizeDocument(t *testing.T) {
	s := newZinc(t, Options{StoreBody: true, BatchSize: 100})
	const huge = "http://example.com/huge"
	var want []string
	for i := range 6 {
		uri := fmt.Sprintf("http://example.com/%d", i)
		put(t, s, uri, "", "small "+uri)
		want = append(want, uri)
		if i == 2 {
			put(t, s, huge, "", strings.Repeat("h", zincMaxDoc))
		}
	}
	var got []string
	if err := s.Walk(t.Context(), func(uri string) error { got = append(got, uri); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
	failed := s.Failed()
	if len(failed) != 1 || failed[0].URI != huge || !errclass.IsPermanent(failed[0].Err) {
		t.Errorf("Failed() = %+v, want the huge put alone, permanent", failed)
	}
	if _, err := s.Get(t.Context(), huge); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Get(huge) = %v, want ErrNotExist", err)
	}
	if err := s.Close(t.Context()); !errclass.IsPermanent(err) {
		t.Errorf("Close = %v, want permanent", err)
	}
}

// TestZincDublinCore: ZincSearch takes the dc_* fields of an oai_dc record
// and finds the record by them.
func TestZincDublinCore(t *testing.T) {
	s := newZinc(t, Options{})
	about := `<provenance xmlns="http://www.openarchives.org/OAI/2.0/provenance"/>`
	r := &sink.Resource{URI: "oai:example.org:1", Length: int64(len(oaiDCRecord)), Type: "application/xml", Sets: []string{"physics", "math:algebra"}, About: []string{about}}
	if err := s.Put(t.Context(), r, strings.NewReader(oaiDCRecord)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var hits []searchHit
	for deadline := time.Now().Add(10 * time.Second); len(hits) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if hits, err = s.search(t.Context(), s.opts.Index, map[string]any{"query": map[string]any{"match": map[string]any{"dc_title": "rivers"}}, "size": 10}); err != nil {
			t.Fatal(err)
		}
	}
	if len(hits) != 1 || fmt.Sprint(decode(t, hits[0].Source)["dc_creator"]) != "[Ada Bob]" {
		t.Fatalf("search dc_title:rivers: %v", hits)
	}
	if doc := decode(t, hits[0].Source); fmt.Sprint(doc["sets"]) != "[physics math:algebra]" || fmt.Sprint(doc["about"]) != "["+about+"]" {
		t.Errorf("sets %v, about %v", doc["sets"], doc["about"])
	}
}

// TestZincChanges checks the change documents that Put and Delete append.
func TestZincChanges(t *testing.T) {
	s := newZinc(t, Options{})
	put(t, s, "http://example.com/a", "text/plain", "alpha")
	put(t, s, "http://example.com/a", "text/plain", "alpha, again")
	if err := s.Delete(t.Context(), "http://example.com/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "http://example.com/never"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var changes []string
	deadline := time.Now().Add(10 * time.Second)
	for len(changes) < 4 && time.Now().Before(deadline) {
		hits, err := s.search(ctx, s.opts.ChangesIndex, map[string]any{
			"query": map[string]any{"match_all": map[string]any{}}, "size": 10,
		})
		if err != nil {
			t.Fatal(err)
		}
		// In the order of the writes: by the sequence number ending the rev
		// (timestamps have millisecond precision).
		seq := func(h searchHit) int {
			n, _ := strconv.Atoi(h.ID[strings.LastIndex(h.ID, "-")+1:])
			return n
		}
		slices.SortFunc(hits, func(a, b searchHit) int { return seq(a) - seq(b) })
		changes = changes[:0]
		for _, h := range hits {
			doc := decode(t, h.Source)
			if doc["rev"] != h.ID {
				t.Errorf("change document %s has rev %v", h.ID, doc["rev"])
			}
			changes = append(changes, fmt.Sprint(doc["change"], " ", doc["uri"]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := "[updated http://example.com/a updated http://example.com/a deleted http://example.com/a deleted http://example.com/never]"
	if fmt.Sprint(changes) != want {
		t.Errorf("change documents %v, want %v", changes, want)
	}
}
