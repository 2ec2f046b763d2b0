package harvestlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/harvestlog"
	"github.com/rsharvest/rsharvest/state"
)

// oneRun is a state holding one finished run of site alpha, with its
// error, and at most one failure.
type oneRun struct {
	at     time.Time
	runErr string
	fail   *state.Failure
}

func (o oneRun) Events(context.Context, time.Time, string) ([]state.Event, error) { return nil, nil }

func (o oneRun) RunsSince(context.Context, time.Time, string) ([]state.Run, error) {
	rep, err := json.Marshal(map[string]string{"status": "failed", "error": o.runErr})
	return []state.Run{{ID: 2, Mode: "baseline", Source: "http://a.example/", Site: "alpha", Status: "failed",
		Started: o.at, Finished: o.at.Add(2 * time.Second), Report: rep}}, err
}

func (o oneRun) EachFailure(_ context.Context, _ time.Time, _ string, fn func(state.Failure) error) error {
	if o.fail == nil {
		return nil
	}
	return fn(*o.fail)
}

// TestWriteTextEscapes: `rsharvest log` prints a failure's URI and
// error, which a source gave (an OAI identifier or a <loc> may hold a
// newline, DEL or a C1 character such as U+009B, all allowed in XML text),
// and a run's error. Each entry stays one line, with no control character
// reaching the terminal, as the run's summary, ls, audit and index show
// the same names (runreport.Printable).
func TestWriteTextEscapes(t *testing.T) {
	at := time.Date(2026, 11, 28, 11, 13, 39, 0, time.UTC)
	failure := func(uri, stage, msg string, permanent bool) *state.Failure {
		return &state.Failure{RunID: 2, URI: uri, Stage: stage, Error: msg, Permanent: permanent, At: at.Add(time.Second)}
	}
	tests := []struct {
		name  string
		state oneRun
	}{
		{"failure URI with a newline", oneRun{at: at, fail: failure(
			"oai:a.example:1\n2026-11-28T11:13:40Z  alpha  harvest ended      run 2: ok: 200 written, 0 deleted, 0 unchanged, 0 failed, 0 skipped", "download", "HTTP 404", false)}},
		{"failure error with terminal escapes", oneRun{at: at, fail: failure(
			"http://a.example/r/1", "download", "invalid document: \x1b]0;owned\x07\x1b[2J", false)}},
		{"failure URI with a C1 CSI", oneRun{at: at, fail: failure(
			"oai:a.example:\u009b2J", "record", "not well-formed", true)}},
		{"run error with a newline", oneRun{at: at,
			runErr: "reading oai:a.example:1\n2026-11-28T11:13:40Z  -      harvester stopped  every site harvested succeeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := harvestlog.Open(t.Context(), tt.state, time.Time{}, "")
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := l.WriteText(t.Context(), &b); err != nil {
				t.Fatal(err)
			}
			entries := 2 // begun, ended
			if tt.state.fail != nil {
				entries++
			}
			out := strings.TrimSuffix(b.String(), "\n")
			if n := strings.Count(out, "\n") + 1; n != entries {
				t.Errorf("%d entries printed as %d lines:\n%s", entries, n, out)
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
