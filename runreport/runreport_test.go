package runreport_test

import (
	"fmt"
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

// TestAdd: the parts' figures are summed; their failures listed up to the
// cap, the rest counted.
func TestAdd(t *testing.T) {
	part := func(written, failures int) *runreport.Report {
		r := &runreport.Report{Mode: "baseline"}
		r.Resources.Written, r.Packages.Done, r.Fetch.Requests, r.Bytes.Written = int64(written), 1, 2, 10
		for i := range failures {
			r.Failures = append(r.Failures, runreport.Failure{URI: fmt.Sprint(i)})
		}
		return r
	}
	tests := []struct {
		name                    string
		parts                   []*runreport.Report
		written, listed, truncd int64
	}{
		{"none", nil, 0, 0, 0},
		{"two", []*runreport.Report{part(3, 1), part(4, 2)}, 7, 3, 0},
		{"past the cap", []*runreport.Report{part(1, runreport.MaxReportedFailures-1), part(1, 3)}, 2, runreport.MaxReportedFailures, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := &runreport.Report{Mode: "baseline", Status: runreport.StatusOK}
			for _, p := range tc.parts {
				rep.Add(p)
			}
			if rep.Resources.Written != tc.written || int64(len(rep.Failures)) != tc.listed || rep.FailuresTruncated != tc.truncd {
				t.Errorf("written %d, failures %d listed and %d truncated; want %d, %d, %d", rep.Resources.Written, len(rep.Failures), rep.FailuresTruncated, tc.written, tc.listed, tc.truncd)
			}
			if n := int64(len(tc.parts)); rep.Packages.Done != n || rep.Fetch.Requests != 2*n || rep.Bytes.Written != 10*n || rep.Status != runreport.StatusOK {
				t.Errorf("report = %+v", rep)
			}
		})
	}
}

// TestPrintable: a name a source gave is shown on one line, its control
// characters and bytes that are not UTF-8 percent-encoded; any other
// character as it is.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.org/a b": "http://example.org/a b",
		"oai:x:é":                "oai:x:é",
		"oai:x:1\nforged":        "oai:x:1%0Aforged",
		"oai:evil:1\roai:good:1": "oai:evil:1%0Doai:good:1",
		"oai:x:\u009b2J":         "oai:x:%C2%9B2J",
		"a\x7fb\x1b[2J":          "a%7Fb%1B[2J",
		"bad\xffbyte":            "bad%FFbyte",
	} {
		if got := runreport.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
