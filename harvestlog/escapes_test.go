package harvestlog_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvestlog"
)

// TestWriteTextEscapes: `rsharvest log` prints a failure's URI and
// error, which a source gave (an OAI identifier or a <loc> may hold a
// newline, DEL or a C1 character such as U+009B, all allowed in XML text),
// and a run's error. Each entry stays one line, with no control character
// reaching the terminal, as the run's summary, ls, audit and index show
// the same names (runreport.Printable).
func TestWriteTextEscapes(t *testing.T) {
	at := time.Date(2026, 11, 28, 11, 13, 39, 0, time.UTC)
	tmp := true
	tests := []struct {
		name  string
		entry harvestlog.Entry
	}{
		{"failure URI with a newline", harvestlog.Entry{At: at, Operation: harvestlog.Failed, Site: "alpha", RunID: 2, Stage: "download", Temporary: &tmp,
			URI: "oai:a.example:1\n2026-11-28T11:13:40Z  alpha  harvest ended      run 2: ok: 200 written, 0 deleted, 0 unchanged, 0 failed, 0 skipped", Error: "HTTP 404"}},
		{"failure error with terminal escapes", harvestlog.Entry{At: at, Operation: harvestlog.Failed, Site: "alpha", RunID: 2, Stage: "download", Temporary: &tmp,
			URI: "http://a.example/r/1", Error: "invalid document: \x1b]0;owned\x07\x1b[2J"}},
		{"failure URI with a C1 CSI", harvestlog.Entry{At: at, Operation: harvestlog.Failed, Site: "alpha", RunID: 2, Stage: "record",
			URI: "oai:a.example:\u009b2J", Error: "not well-formed"}},
		{"run error with a newline", harvestlog.Entry{At: at, Operation: harvestlog.HarvestEnded, Site: "alpha", RunID: 2, Status: "failed",
			Error: "reading oai:a.example:1\n2026-11-28T11:13:40Z  -      harvester stopped  every site harvested succeeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := harvestlog.WriteText(&b, []harvestlog.Entry{tt.entry}); err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSuffix(b.String(), "\n")
			if strings.Contains(out, "\n") {
				t.Errorf("one entry printed as %d lines:\n%s", strings.Count(out, "\n")+1, out)
			}
			for _, r := range out {
				if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
					if r != '\n' {
						t.Errorf("control character %U reaches the terminal: %q", r, out)
						break
					}
				}
			}
		})
	}
}
