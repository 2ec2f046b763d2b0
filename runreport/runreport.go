// Package runreport is the report of one run — what it did, what failed —
// as the executor fills it, --report writes it, the state keeps it and the
// harvest log, the status page and the reports read it back. It is a leaf:
// whoever reads a report needs nothing else of the executor.
package runreport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// Failure is one failed item of a run, as written to the report.
type Failure struct {
	URI       string `json:"uri"`
	Package   string `json:"package,omitempty"`
	Stage     string `json:"stage"`
	Error     string `json:"error"`
	Permanent bool   `json:"permanent"`
}

// Skip is an entry of a package that the run did not deliver without it
// being a failure: a ZIP entry that the package's manifest does not list.
// Document is what a run did to a record that carries a version: its
// Outcome is DocInserted, DocUpdated (from Previous to Version) or
// DocHeld (Version held already).
type Document struct {
	URI      string `json:"uri"`
	Outcome  string `json:"outcome"`
	Version  string `json:"version"`
	Previous string `json:"previous,omitempty"`
}

// The outcomes of a Document.
const (
	DocInserted = "inserted"
	DocUpdated  = "updated"
	DocHeld     = "held"
)

type Skip struct {
	Package string `json:"package"`
	Entry   string `json:"entry"`
	Reason  string `json:"reason"`
}

// MaxReportedFailures caps how many failures a Report lists; the state
// store keeps every one of them.
const MaxReportedFailures = 1000

// Resources count what a run did to resources.
type Resources struct {
	Written   int64 `json:"written"`
	Deleted   int64 `json:"deleted"`
	Unchanged int64 `json:"unchanged"`
	Failed    int64 `json:"failed"`
	Skipped   int64 `json:"skipped"`
	// Unverified are the written resources that gave no digest: they
	// passed only their declared length and, in a package, CRC-32.
	Unverified int64 `json:"unverified"`
}

// Report is the outcome of a run, as written by --report.
type Report struct {
	Mode     string    `json:"mode"`
	Source   string    `json:"source"`
	RunID    int64     `json:"run_id"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Status   string    `json:"status"`
	// Protocol is the source's protocol (source.Protocol's name), when
	// known.
	Protocol string `json:"protocol,omitempty"`
	// DryRun says the run changed nothing: its counts are what it would
	// have written, deleted and found unchanged.
	DryRun bool `json:"dry_run,omitempty"`
	// Planned, in the counts a running run records so far, is how many
	// resources its plan has named (the units of work), of which its
	// resource counts are those done; PlanRead says the plan is read
	// whole, so Planned is the run's total.
	Planned  int64 `json:"planned,omitempty"`
	PlanRead bool  `json:"plan_read,omitempty"`
	// NoDigests says the protocol gives no digest to check what it brings
	// (source.Protocol.NoDigests).
	NoDigests bool `json:"no_digests,omitempty"`
	// Sinks are the sinks the run wrote to, as the state names them
	// (credentials redacted), in the job's order.
	Sinks []string `json:"sinks,omitempty"`
	// At is the snapshot time of what a baseline read.
	At *time.Time `json:"at,omitempty"`
	// From and Until are an incremental run's explicit range, if given.
	From     *time.Time `json:"from,omitempty"`
	Until    *time.Time `json:"until,omitempty"`
	Packages struct {
		Total  int64 `json:"total"`
		Done   int64 `json:"done"`
		Failed int64 `json:"failed"`
	} `json:"packages"`
	Resources Resources `json:"resources"`
	Bytes     struct {
		Downloaded int64 `json:"downloaded"`
		Written    int64 `json:"written"`
	} `json:"bytes"`
	Fetch FetchStats `json:"fetch"`
	// Versions counts, of the records that carry a version (a harvest
	// list's revision), those inserted (none held before), updated
	// (another version held before) and held (that version held already);
	// Documents says it of the first MaxReportedFailures of them.
	Versions struct {
		Inserted int64 `json:"inserted"`
		Updated  int64 `json:"updated"`
		Held     int64 `json:"held"`
	} `json:"versions,omitzero"`
	Documents         []Document `json:"documents,omitempty"`
	Failures          []Failure  `json:"failures"`
	FailuresTruncated int64      `json:"failures_truncated,omitempty"`
	Skips             []Skip     `json:"skips,omitempty"`
	// Error is the fatal error that ended the run early, if any.
	Error string `json:"error,omitempty"`
	// Units, for a task spread over workers while it runs, are its units
	// done of all.
	Units *Units `json:"units,omitempty"`
}

// Units counts the units of a task spread over workers.
type Units struct {
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
}

// FetchStats are the HTTP client's counters for the run.
type FetchStats struct {
	Requests int64 `json:"requests"`
	Retries  int64 `json:"retries"`
	Resumes  int64 `json:"resumes"`
	Restarts int64 `json:"restarts"`
	// Throttled counts the waits --bwlimit imposed.
	Throttled int64 `json:"throttled,omitempty"`
}

// Run statuses.
const (
	StatusOK      = "ok"      // every resource synced
	StatusPartial = "partial" // the run finished, some items failed
	StatusFailed  = "failed"  // a fatal error ended the run
	// StatusInterrupted: the run was stopped (an interrupt, the daemon
	// stopping) before it ended; what it committed stays, and running it
	// again resumes.
	StatusInterrupted = "interrupted"
)

// Resume is what to do after an interrupted run.
const Resume = "run the same command again to resume"

// Add adds the figures of o, a report of one part of the same task (see
// state.CreateTask), to rep: every count summed, its failures, skips and
// documents listed after rep's up to MaxReportedFailures (those left out
// counted in FailuresTruncated). rep's own fields (mode, source, run,
// times, status) are left as they are.
func (rep *Report) Add(o *Report) {
	rep.Packages.Total += o.Packages.Total
	rep.Packages.Done += o.Packages.Done
	rep.Packages.Failed += o.Packages.Failed
	r, or := &rep.Resources, &o.Resources
	r.Written, r.Deleted, r.Unchanged = r.Written+or.Written, r.Deleted+or.Deleted, r.Unchanged+or.Unchanged
	r.Failed, r.Skipped, r.Unverified = r.Failed+or.Failed, r.Skipped+or.Skipped, r.Unverified+or.Unverified
	rep.Bytes.Downloaded += o.Bytes.Downloaded
	rep.Bytes.Written += o.Bytes.Written
	f, of := &rep.Fetch, &o.Fetch
	f.Requests, f.Retries, f.Resumes = f.Requests+of.Requests, f.Retries+of.Retries, f.Resumes+of.Resumes
	f.Restarts, f.Throttled = f.Restarts+of.Restarts, f.Throttled+of.Throttled
	rep.Versions.Inserted += o.Versions.Inserted
	rep.Versions.Updated += o.Versions.Updated
	rep.Versions.Held += o.Versions.Held
	rep.Planned += o.Planned
	rep.FailuresTruncated += o.FailuresTruncated
	var left int
	rep.Failures, left = appendCapped(rep.Failures, o.Failures)
	rep.FailuresTruncated += int64(left)
	rep.Skips, _ = appendCapped(rep.Skips, o.Skips)
	rep.Documents, _ = appendCapped(rep.Documents, o.Documents)
}

// appendCapped appends to dst what of src fits under MaxReportedFailures,
// and says how many of src were left out.
func appendCapped[T any](dst, src []T) ([]T, int) {
	k := max(0, min(len(src), MaxReportedFailures-len(dst)))
	return append(dst, src[:k]...), len(src) - k
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteFile writes the report as JSON to path atomically (temp file and
// rename), so a reader never sees half a report.
func (rep *Report) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.json")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := rep.WriteJSON(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// Summary renders the report in a few human-readable lines.
func (rep *Report) Summary() string {
	d := rep.Finished.Sub(rep.Started)
	mbps := 0.0
	if d > 0 {
		mbps = float64(rep.Bytes.Written) / 1e6 / d.Seconds()
	}
	s := fmt.Sprintf("%s of %s: %s in %s\n", rep.Mode, rep.Source, rep.Status, d.Round(time.Millisecond))
	if rep.DryRun {
		s = fmt.Sprintf("dry run (%s) of %s: %s in %s; nothing was written or deleted\n", rep.Mode, rep.Source, rep.Status, d.Round(time.Millisecond))
		s += fmt.Sprintf("  would write %d (%d bytes declared), delete %d; %d unchanged\n", rep.Resources.Written, rep.Bytes.Written, rep.Resources.Deleted, rep.Resources.Unchanged)
		if rep.Error != "" {
			s += "  error:     " + rep.Error + "\n"
		}
		return s
	}
	if rep.Packages.Total > 0 || rep.Packages.Failed > 0 { // lists and OAI-PMH read no package
		s += fmt.Sprintf("  packages:  %d total, %d done, %d failed\n", rep.Packages.Total, rep.Packages.Done, rep.Packages.Failed)
	}
	s += fmt.Sprintf("  resources: %d written, %d deleted, %d unchanged, %d failed, %d skipped\n",
		rep.Resources.Written, rep.Resources.Deleted, rep.Resources.Unchanged, rep.Resources.Failed, rep.Resources.Skipped)
	switch {
	case rep.Resources.Unverified > 0 && rep.NoDigests:
		// The protocol gives no digest: nothing to refuse, nothing to fix.
		s += fmt.Sprintf("  unverified: %d records (%s gives no digest; rsharvest keeps its own sha-256 of each)\n", rep.Resources.Unverified, cmp.Or(rep.Protocol, "the protocol"))
	case rep.Resources.Unverified > 0:
		s += fmt.Sprintf("  unverified: %d of the written resources gave no hash (checked by their length only, and CRC-32 inside a package; --require-hash refuses them)\n", rep.Resources.Unverified)
	}
	s += fmt.Sprintf("  bytes:     %d downloaded, %d written (%.1f MB/s)\n", rep.Bytes.Downloaded, rep.Bytes.Written, mbps)
	if rep.Error != "" {
		s += "  error:     " + rep.Error + "\n"
	}
	for i, f := range rep.Failures {
		if i == 10 {
			s += fmt.Sprintf("  … and %d more failures (see the report or the state store)\n", int64(len(rep.Failures)-10)+rep.FailuresTruncated)
			break
		}
		s += fmt.Sprintf("  failed: %s: %s\n", Printable(f.URI), Printable(f.Error))
	}
	return s
}

// Read decodes a report a run recorded (state.Run.Report); false when
// there is none, or it cannot be read. It is the one decoder of a
// recorded report, for the harvest log, the status page and the reports.
func Read(b []byte) (*Report, bool) {
	var rep Report
	if b == nil || json.Unmarshal(b, &rep) != nil {
		return nil, false
	}
	return &rep, true
}

// Printable returns s, a name a source gave (a URI, an identifier), as a
// line of text may show it: each control character (C0, DEL, C1), and
// each byte that is not UTF-8, percent-encoded, so that a name can neither
// break a line, rewrite what a terminal shows, nor send it a command.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unprintable(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unprintable(r) {
			for _, c := range []byte(s[i : i+n]) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unprintable reports whether r must not reach a terminal as it is: a
// control character, or the rune of a byte that is not UTF-8.
func unprintable(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError
}
