package runreport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/runreport"
)

// TestReport writes a report, reads it back as the state's readers do, and
// renders its summary.
func TestReport(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep := &runreport.Report{Mode: "baseline", Source: "http://127.0.0.1:1/", RunID: 7, Started: start, Finished: start.Add(2 * time.Second),
		Status: runreport.StatusPartial, Error: "", Failures: []runreport.Failure{{URI: "u", Stage: "verify", Error: "length", Permanent: true}}}
	rep.Resources.Written, rep.Bytes.Written = 3, 4e6
	path := filepath.Join(t.TempDir(), "report.json")
	if err := rep.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	back, ok := runreport.Read(b)
	if !ok || back.RunID != 7 || back.Status != runreport.StatusPartial || len(back.Failures) != 1 || back.Failures[0] != rep.Failures[0] || !back.Finished.Equal(rep.Finished) {
		t.Fatalf("read back %+v, %v", back, ok)
	}
	for _, bad := range [][]byte{nil, []byte("{"), []byte("[]")} {
		if _, ok := runreport.Read(bad); ok {
			t.Errorf("Read(%q) = ok", bad)
		}
	}
	sum := back.Summary()
	for _, want := range []string{"baseline of http://127.0.0.1:1/: partial in 2s", "3 written", "2.0 MB/s", "failed: u: length"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "packages:") {
		t.Errorf("a run that read no package shows packages:\n%s", sum)
	}
}

// TestSummaryUnverified: the summary's advice to --require-hash is given
// only where a source could give digests; OAI-PMH records and harvest
// list documents never do (source.Protocol.NoDigests).
func TestSummaryUnverified(t *testing.T) {
	for _, tc := range []struct {
		protocol  string
		noDigests bool
		advice    bool
	}{{"oai-pmh", true, false}, {"harvest-list", true, false}, {"resourcesync", false, true}, {"", false, true}} {
		rep := &runreport.Report{Mode: "baseline", Source: "http://x/", Status: runreport.StatusOK, Protocol: tc.protocol, NoDigests: tc.noDigests}
		rep.Resources.Written, rep.Resources.Unverified = 10, 10
		s := rep.Summary()
		if !strings.Contains(s, "unverified: 10") || strings.Contains(s, "--require-hash") != tc.advice {
			t.Errorf("protocol %q: summary\n%s", tc.protocol, s)
		}
	}
}
