package harvest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
	"github.com/rsharvest/rsharvest/config"
	"github.com/rsharvest/rsharvest/errclass"
	"github.com/rsharvest/rsharvest/fetch"
	"github.com/rsharvest/rsharvest/harvest"
	"github.com/rsharvest/rsharvest/pipeline"
	"github.com/rsharvest/rsharvest/runreport"
	"github.com/rsharvest/rsharvest/sink"
	"github.com/rsharvest/rsharvest/sink/fs"
	"github.com/rsharvest/rsharvest/site"
	"github.com/rsharvest/rsharvest/state"
)

// source serves a generated ResourceSync source with a Change Dump,
// published up to step 0.
func source(t *testing.T) (*bench.Server, bench.GenOptions) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := bench.Serve(ctx, dir, "127.0.0.1:0", bench.ServeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	gen := bench.GenOptions{Dir: dir, Base: srv.URL, Resources: 40, Packages: 2, Seed: 3, MeanSize: 800, ChangePackages: 2, ChangesPerPackage: 6}
	if _, err := bench.Generate(ctx, gen); err != nil {
		t.Fatal(err)
	}
	srv.Handler.Publish(0)
	return srv, gen
}

func openStore(t *testing.T) *state.Store {
	t.Helper()
	st, err := state.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSite harvests a registry site through the library alone — no
// command, and no cobra linked into the process: its first harvest is a
// baseline, the next, after the source published its changes, an
// incremental run that leaves the mirror equal to the source.
func TestSite(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if strings.Contains(m.Path, "cobra") {
				t.Fatalf("%s is linked into a process that only uses the library", m.Path)
			}
		}
	}
	ctx := context.Background()
	srv, gen := source(t)
	mirror := filepath.Join(t.TempDir(), "mirror")
	st, reg := registry(t, `sites:
  - name: demo
    source: `+srv.URL+`
    sinks: [fs:`+mirror+`]
    schedule: every 1d
    concurrency: 2
`)
	s, err := reg.Site(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	rep, err := h.Site(ctx, s, "")
	if err != nil || rep.Status != runreport.StatusOK || rep.Mode != "baseline" {
		t.Fatalf("first harvest: %v %+v", err, rep)
	}
	srv.Handler.Publish(-1)
	rep, err = h.Site(ctx, s, "")
	if err != nil || rep.Status != runreport.StatusOK || rep.Mode != "incremental" {
		t.Fatalf("second harvest: %v %+v", err, rep)
	}
	want := map[string][]byte{}
	if err := bench.TruthAfter(ctx, gen, gen.ChangePackages, func(uri string, body io.Reader) error {
		b, err := io.ReadAll(body)
		want[uri] = b
		return err
	}); err != nil {
		t.Fatal(err)
	}
	inv, err := fs.New(mirror, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := inv.Walk(ctx, func(uri string) error {
		n++
		rc, err := inv.Get(ctx, uri)
		if err != nil {
			return err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err == nil && !bytes.Equal(b, want[uri]) {
			t.Errorf("%s differs from the source", uri)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("the mirror holds %d resources, the source %d", n, len(want))
	}
}

// TestSyncWithKey: a job whose source is named in the state by a key of
// its own (the demo's, whose port changes) is synced from its checkpoint
// the second time, not loaded again: "has it a checkpoint?" is asked of
// the key the run records under.
func TestSyncWithKey(t *testing.T) {
	ctx := context.Background()
	srv, _ := source(t)
	st := openStore(t)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}}
	j := harvest.DefaultJob()
	j.Source, j.SourceKey, j.Sinks = srv.URL, "demo-key", []string{"fs:" + t.TempDir()}
	for i, want := range []string{"baseline", "incremental"} {
		rep, err := h.Run(ctx, harvest.Sync, j)
		if err != nil || rep.Mode != want {
			t.Fatalf("sync %d: %v, mode %q, want %q", i+1, err, rep.Mode, want)
		}
	}
}

// TestInvalidJob: a job's wrong settings are InvalidErrors naming the
// setting, before anything is opened.
func TestInvalidJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*harvest.Job)
		want string
	}{
		{"no source", func(j *harvest.Job) { j.Source = "" }, "--source"},
		{"no sink", func(j *harvest.Job) { j.Sinks = nil }, "--sink"},
		{"protocol", func(j *harvest.Job) { j.Protocol = "gopher" }, "--protocol"},
		{"range", func(j *harvest.Job) { j.From, j.Until = "2024-02-01", "2024-01-01" }, "--from"},
		{"header", func(j *harvest.Job) { j.Headers = []string{"no colon"} }, "--header"},
		{"unknown sink", func(j *harvest.Job) { j.Sinks = []string{"ftp://x"} }, "ftp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := harvest.DefaultJob()
			j.Source, j.Sinks = "http://127.0.0.1:1/", []string{"fs:" + t.TempDir()}
			tc.mod(&j)
			h := &harvest.Harvester{Store: openStore(t), Sinks: sink.Registry{"fs": fs.Open}}
			_, err := h.Run(context.Background(), harvest.Sync, j)
			if !harvest.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want an InvalidError naming %s", err, tc.want)
			}
		})
	}
}

// TestRetry is the daemon's policy for a site harvest's outcome.
func TestRetry(t *testing.T) {
	unreadable := func(err error) error { return &pipeline.SourceError{URL: "http://x/", Err: err} }
	for _, tc := range []struct {
		name   string
		status string
		err    error
		want   string // "nil", "retryable", "as is"
	}{
		{"ok", runreport.StatusOK, nil, "nil"},
		{"source down", runreport.StatusFailed, unreadable(errclass.Retryablef("HTTP 503")), "retryable"},
		{"host unreachable", runreport.StatusFailed, unreadable(errclass.Permanentf("GET http://x/: %w (connection refused)", fetch.ErrUnreachable)), "retryable"},
		{"source wrong", runreport.StatusFailed, unreadable(errclass.Permanentf("not a ResourceSync document")), "as is"},
		{"partial", runreport.StatusPartial, errors.New("site x: harvest partial"), "nil"},
		{"failed", runreport.StatusFailed, errors.New("disk full"), "as is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := harvest.Retry(tc.status, tc.err)
			switch {
			case tc.want == "nil" && got != nil, tc.want == "retryable" && !errclass.IsRetryable(got),
				tc.want == "as is" && (got != tc.err || errclass.IsRetryable(got)):
				t.Errorf("Retry = %v (%s), want %s", got, errclass.Of(got), tc.want)
			}
		})
	}
}

// TestParseWhen: a time on the command line is a W3C datetime or a
// duration back from now, as --from and log --since take it.
func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"24h", now.Add(-24 * time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"2026-11-01", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), true},
		{"2026-11-01T10:00:00Z", time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC), true},
		{"yesterday", time.Time{}, false},
	} {
		got, err := harvest.ParseWhen(tc.in, now)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestFailedSiteDueSoon: a site whose harvest failed is due again after a
// short backoff, doubled by each failure in a row and never past its
// period, not a whole period later; a harvest that succeeds ends it. A
// harvest that fails before its run begins (its sink cannot be opened)
// backs off the same way.
func TestFailedSiteDueSoon(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/"
	ln.Close()
	st, reg := registry(t, `sites:
  - name: down
    source: `+down+`
    sinks: [fs:`+filepath.Join(t.TempDir(), "m")+`]
    schedule: every 12h
`)
	h := &harvest.Harvester{Store: st, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	for i, want := range []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
		s, err := reg.Site(ctx, "down")
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().UTC()
		if _, err := h.One(ctx, s, "", nil, nil, nil); err == nil {
			t.Fatalf("harvest %d of an unreachable source succeeded", i+1)
		}
		s, _ = reg.Site(ctx, "down")
		if s.LastStatus != runreport.StatusFailed || s.Next.Before(before.Add(want)) || s.Next.After(time.Now().Add(want)) {
			t.Errorf("after failure %d: status %s, next %v; want failed, due %v later", i+1, s.LastStatus, s.Next, want)
		}
	}
	// A sink that cannot be opened: a file where its directory would be.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st2, reg2 := registry(t, `sites:
  - name: nosink
    source: `+down+`
    sinks: [fs:`+filepath.Join(blocked, "mirror")+`]
    schedule: every 12h
`)
	h2 := &harvest.Harvester{Store: st2, Sinks: sink.Registry{"fs": fs.Open}, Log: slog.New(slog.DiscardHandler)}
	for i, want := range []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
		s, err := reg2.Site(ctx, "nosink")
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now().UTC()
		if _, err := h2.One(ctx, s, "", nil, nil, nil); err == nil {
			t.Fatalf("harvest %d into a sink that cannot be opened succeeded", i+1)
		}
		s, _ = reg2.Site(ctx, "nosink")
		if s.LastStatus != runreport.StatusFailed || s.LastRunID != 0 || s.Next.Before(before.Add(want)) || s.Next.After(time.Now().Add(want)) {
			t.Errorf("failed before its run, %d: status %s, run %d, next in %v; want failed, no run, due %v later", i+1, s.LastStatus, s.LastRunID, s.Next.Sub(before).Round(time.Second), want)
		}
	}
	s, _ := reg.Site(ctx, "down")
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := s.RetryAfter(last, 12, time.UTC); !got.Equal(last.Add(12 * time.Hour)) {
		t.Errorf("after 12 failures: due %v, want the period (12h) after %v", got, last)
	}
}

// registry is a fresh state store holding the sites of a registry file.
func registry(t *testing.T, file string) (*state.Store, site.Registry) {
	t.Helper()
	sites, err := config.DecodeSites(strings.NewReader(file), "sites.yaml", harvest.Settings(), harvest.SiteTargets)
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	reg := site.Registry{Store: st}
	if _, err := reg.Apply(context.Background(), sites, true); err != nil {
		t.Fatal(err)
	}
	return st, reg
}
