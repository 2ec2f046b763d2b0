package publish

import (
	"bufio"
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/fixity"
	"github.com/rsharvest/rsharvest/state"
)

// BenchmarkPublishMillion publishes a state of 1,000,000 resources and as
// many changes, and reports the process's peak resident set (VmHWM), which
// must not grow with the holdings:
//
//	go test -run '^$' -bench PublishMillion -benchtime 1x ./publish/
func BenchmarkPublishMillion(b *testing.B) {
	ctx := context.Background()
	st, err := state.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	run, err := st.BeginRun(ctx, state.Run{Mode: "baseline", Source: "http://example.org/rs"})
	if err != nil {
		b.Fatal(err)
	}
	const n, batch = 1_000_000, 10_000
	for k := 0; k < n; k += batch {
		var bt state.Batch
		for i := k; i < k+batch; i++ {
			u := fmt.Sprintf("http://example.org/resources/%07d.xml", i)
			h := md5.Sum([]byte(u))
			sum := fixity.Hashes{MD5: h[:]}
			bt.Resources = append(bt.Resources, state.Resource{URI: u, Source: "http://example.org/rs", Length: 200, Hashes: sum, Type: "application/xml", Outcome: state.OutcomeWritten, RunID: run})
			bt.Changes = append(bt.Changes, state.ChangeRecord{URI: u, Source: "http://example.org/rs", Change: state.ChangeCreated, Length: 200, Hashes: sum, Type: "application/xml", RunID: run})
		}
		if err := st.Commit(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	before := vmHWM(b)
	b.ResetTimer()
	for range b.N {
		res, err := Publish(ctx, FromState(st), Options{Out: b.TempDir(), BaseURL: "http://127.0.0.1:1/pub", Copies: true})
		if err != nil {
			b.Fatal(err)
		}
		if res.Resources != n || res.Changes != n {
			b.Fatalf("published %+v", res)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(vmHWM(b))/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(before)/(1<<20), "RSS-before-MiB")
}

// vmHWM is the process's peak resident set, in bytes.
func vmHWM(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
