package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/bench"
)

// buildRsharvest builds the rsharvest command into the test's directory.
func buildRsharvest(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rsharvest")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/rsharvest/rsharvest/cmd/rsharvest").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestRunTinyDump(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	other := buildRsharvest(t)
	opts := Options{
		Gen:         bench.GenOptions{Resources: 60, Packages: 3, MeanSize: 4000, Seed: 1},
		CacheDir:    cache,
		WorkDir:     t.TempDir(),
		Concurrency: []int{1, 2},
		Refs:        true,
		Resync:      true,
		Stages:      true,
		VerifyAll:   true,
		Compare:     []string{other},
	}
	res, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Dump.Resources != 60 || res.Dump.Packages != 3 || res.Dump.Cached {
		t.Fatalf("dump = %+v", res.Dump)
	}
	if len(res.Stages) != 2 || res.Stages[0].Name != "rsharvest -c 2" || res.Stages[1].Name != RefLimit {
		t.Errorf("profiled runs %+v, want the pipeline's at -c 2 and the limit's", res.Stages)
	}
	want := []string{"rsharvest -c 1", "rsharvest -c 2", RowResync, RowResyncRange, RowResyncCopies, "rsharvest -c 2 --verify all",
		RefDownload, RefLimit, RefNaive, RefPython, RefLimitAll, RefPythonAll, other + " -c 2"}
	if len(res.Rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(res.Rows), len(want), res.Rows)
	}
	for i, row := range res.Rows {
		if row.Name != want[i] {
			t.Errorf("row %d is %q, want %q", i, row.Name, want[i])
		}
		if row.Skipped {
			t.Logf("%s skipped: %s", row.Name, row.Note)
			continue
		}
		if row.Kind == KindResync {
			// How much faster a re-sync is, is measured by the harness, not
			// asserted here: on a dump this small it is within the noise.
			// What must hold is that the figures are there and that the
			// default re-sync (the package skip) downloads nothing.
			if row.Speedup <= 0 || row.Seconds <= 0 || row.Ratio != 0 {
				t.Errorf("re-sync row %+v: no speedup figure", row)
			}
			if row.Name == RowResync && row.DownloadedMB != 0 {
				t.Errorf("re-sync row %+v: the package skip downloaded %.3f MB", row, row.DownloadedMB)
			}
			continue
		}
		if row.Seconds <= 0 || row.MBps <= 0 || row.ResPerSec <= 0 || row.CPUSeconds <= 0 || row.CPUPerGB <= 0 || row.PeakRSSMB <= 0 || row.Ratio <= 0 {
			t.Errorf("row %+v has a figure that is not positive", row)
		}
		if (row.Kind == KindRun || row.Kind == KindCompare) && (row.VsPython <= 0 || (row.VsNaive <= 0) != row.VerifyAll) {
			t.Errorf("run %+v: no ratio to the Python job or the naive pipeline", row)
		}
		if row.VerifyAll != strings.HasSuffix(row.Name, "every digest") && row.VerifyAll != strings.HasSuffix(row.Name, "--verify all") {
			t.Errorf("row %s: verify_all %v", row.Name, row.VerifyAll)
		}
		if (row.Kind == KindRun || row.Name == RefNaive) && row.DownloadedMB <= 0 {
			t.Errorf("row %s downloaded nothing", row.Name)
		}
	}

	var table bytes.Buffer
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(table.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, table.String())
		}
	}

	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	if len(back.Rows) != len(res.Rows) {
		t.Errorf("JSON has %d rows", len(back.Rows))
	}

	var svg bytes.Buffer
	if err := res.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkXML(t, svg.Bytes())
	if !strings.Contains(svg.String(), "<polyline") {
		t.Error("SVG has no concurrency line")
	}

	// The second time the dump comes from the cache.
	opts.Concurrency, opts.Refs, opts.Resync, opts.VerifyAll, opts.Compare = []int{1}, false, false, false, nil
	res2, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Dump.Cached || res2.Dump.Dir != res.Dump.Dir || len(res2.Rows) != 1 {
		t.Errorf("second run: dump %+v, %d rows", res2.Dump, len(res2.Rows))
	}
}

// checkXML fails unless b is well-formed XML.
func checkXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
	}
}

func TestLinkThrottle(t *testing.T) {
	dir := t.TempDir()
	const size = 400 << 10
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), bytes.Repeat([]byte{'x'}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	fetch := func(wrap func(http.Handler) http.Handler) time.Duration {
		t.Helper()
		srv, err := bench.Serve(context.Background(), dir, "127.0.0.1:0", bench.ServeOptions{Wrap: wrap, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		start := time.Now()
		resp, err := http.Get(srv.URL + "big.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != size {
			t.Fatalf("read %d bytes, %v", n, err)
		}
		return time.Since(start)
	}
	const rateBps = 1e6
	got := fetch(Wrap(rateBps, 0))
	// The bucket starts full (32 KiB); the rest waits for tokens.
	least := time.Duration(float64(size-chunk) / rateBps * 0.9 * float64(time.Second))
	if got < least {
		t.Errorf("throttled to 1 MB/s, 400 KiB took %v, want at least %v", got, least)
	}
	if got > 5*time.Second {
		t.Errorf("throttled to 1 MB/s, 400 KiB took %v", got)
	}
	if free := fetch(nil); free >= got {
		t.Errorf("unthrottled %v is not faster than throttled %v", free, got)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"": 0, "0": 0, "1000": 1000, "50MB/s": 50e6, "1.5GB/s": 1.5e9, "800KiB/s": 800 << 10, "2 MiB": 2 << 20, "10B/s": 10,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "-1MB/s", "MB/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

func TestNiceScale(t *testing.T) {
	for _, v := range []float64{0, 0.3, 7, 42, 183, 999} {
		top, step := niceScale(v)
		if top < v || step <= 0 || top/step > 11 {
			t.Errorf("niceScale(%v) = %v, %v", v, top, step)
		}
	}
}

// TestRepeat: every row measured in each round, the median kept, the
// ratios computed from the medians.
func TestRepeat(t *testing.T) {
	opts := Options{
		Gen:         bench.GenOptions{Resources: 30, Packages: 2, MeanSize: 3000, Seed: 2},
		CacheDir:    t.TempDir(),
		WorkDir:     t.TempDir(),
		Concurrency: []int{1, 2},
		Refs:        true,
	}
	res, err := Repeat(t.Context(), opts, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 3 || len(res.Rows) != 6 || !strings.Contains(strings.Join(res.Notes, "\n"), "median") {
		t.Fatalf("rounds %d, %d rows, notes %q", res.Rounds, len(res.Rows), res.Notes)
	}
	for _, row := range res.Rows {
		if !row.Skipped && (row.Seconds <= 0 || row.CPUPerGB <= 0 || row.Ratio <= 0) {
			t.Errorf("row %+v: figures missing", row)
		}
	}
	if _, err := Repeat(t.Context(), opts, 0); err == nil {
		t.Error("0 rounds accepted")
	}
}
