package harness

import (
	"bytes"
	"fmt"
	"io"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Stages is the CPU a run spent in each stage of the work, in seconds, read
// from a CPU profile of the process taken during the run (one profiled
// run, beside the measured ones: the profiler's own cost stays out of the
// timings).
type Stages map[string]float64

// The stages, in the order the table lists them.
const (
	StageReceive  = "receive"
	StageSpool    = "spool I/O"
	StageInflate  = "inflate"
	StageHash     = "hashing"
	StageManifest = "manifest"
	StageWrite    = "writing files"
	StageState    = "state"
	StageServer   = "loopback server"
	StageGC       = "GC"
	StageOther    = "other"
)

var stageOrder = []string{StageReceive, StageSpool, StageInflate, StageHash, StageManifest, StageWrite, StageState, StageServer, StageGC, StageOther}

// stageRules name a sample's stage from the functions on its stack: the
// first rule one of whose patterns a frame contains wins, so the kernels
// (inflating, hashing, parsing, SQLite) come before what calls them, and
// reading a package's bytes (the spool, or the limit's buffer) before the
// sink whose copy asks for them.
var stageRules = []struct {
	stage    string
	patterns []string
}{
	{StageServer, []string{"net/http.(*conn).serve"}},
	{StageInflate, []string{"compress/flate", "klauspost/compress", "libdeflate"}},
	{StageHash, []string{"crypto/md5", "crypto/sha1", "crypto/sha256", "crypto/sha512", "crypto/internal/fips140/sha", "hash/crc32"}},
	{StageManifest, []string{"encoding/xml", "rsharvest/manifest"}},
	{StageState, []string{"modernc.org/sqlite", "modernc.org/libc", "rsharvest/state"}},
	{StageReceive, []string{"net.(*conn).Read", "net/http.(*persistConn)", "net/http.(*body)", "crypto/tls"}},
	{StageSpool, []string{"os.(*File).ReadAt", "os.(*File).Read", "rsharvest/unzip", "rsharvest/fetch"}},
	{StageWrite, []string{"rsharvest/sink/", "harness.writeEntry"}},
	{StageGC, []string{"runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge"}},
}

// stageOf names the stage of a stack of function names (leaf first).
func stageOf(stack []string) string {
	for _, r := range stageRules {
		for _, fn := range stack {
			for _, p := range r.patterns {
				if strings.Contains(fn, p) {
					return r.stage
				}
			}
		}
	}
	return StageOther
}

// profileStages runs fn under the CPU profiler and returns the CPU it took
// by stage. When the profiler is taken (rsharvest --cpuprofile), it runs fn
// alone and returns no stages.
func profileStages(fn func() error) (Stages, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, fn()
	}
	err := fn()
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	return stagesOf(&buf)
}

// stagesOf reads a CPU profile and adds its samples up by stage.
func stagesOf(r io.Reader) (Stages, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("harness: reading the CPU profile: %w", err)
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		return nil, fmt.Errorf("harness: a CPU profile without CPU samples")
	}
	out := Stages{}
	for _, s := range p.Sample {
		var stack []string
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil {
					stack = append(stack, l.Function.Name)
				}
			}
		}
		out[stageOf(stack)] += float64(s.Value[cpu]) / 1e9
	}
	return out, nil
}

// writeStages writes the CPU by stage of the profiled rows, one column
// each, with each stage's share of the column's total.
func writeStages(w io.Writer, names []string, stages []Stages) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(w, "CPU by stage, one profiled run each (seconds, share):\n%-16s", "stage")
	for _, n := range names {
		fmt.Fprintf(w, " %24s", n)
	}
	fmt.Fprintln(w)
	totals := make([]float64, len(stages))
	for i, st := range stages {
		for _, v := range st {
			totals[i] += v
		}
	}
	for _, stage := range append(stageOrder, "total") {
		fmt.Fprintf(w, "%-16s", stage)
		for i, st := range stages {
			v := st[stage]
			if stage == "total" {
				v = totals[i]
			}
			fmt.Fprintf(w, " %16.2f (%3.0f %%)", v, 100*v/max(totals[i], 1e-9))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
