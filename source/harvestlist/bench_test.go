package harvestlist_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rsharvest/rsharvest/source"
	"github.com/rsharvest/rsharvest/source/harvestlist"
	"github.com/rsharvest/rsharvest/source/sourcetest"
)

// BenchmarkPlan plans a list of 100,000 documents and reports the heap
// in use at its end beside the list's size: memory that does not grow
// with the list but for pass 1's 16 bytes a document.
func BenchmarkPlan(b *testing.B) {
	const n = 100_000
	list := filepath.Join(b.TempDir(), "list.xml")
	var sb strings.Builder
	sb.WriteString(`<hrv:harvestList xmlns:hrv="eml://ecoinformatics.org/harvestList">`)
	for i := range n {
		fmt.Fprintf(&sb, "<document><docid><scope>knb-lter</scope><identifier>%d</identifier><revision>%d</revision></docid><documentType>https://eml.ecoinformatics.org/eml-2.2.0</documentType><documentURL>https://site.example/metacat/knb-lter.%d.%d</documentURL></document>\n", i, 1+i%5, i, 1+i%5)
	}
	sb.WriteString("</hrv:harvestList>")
	if err := os.WriteFile(list, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	size := sb.Len()
	sb = strings.Builder{}
	p := &harvestlist.Planner{ScratchDir: b.TempDir(), OpenDocument: func(context.Context, string) (io.ReadCloser, error) { return os.Open(list) }}
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		recs := 0
		var peak uint64
		_, err := p.Plan(context.Background(), source.Task{Source: "file", Mode: source.Baseline}, sourcetest.Holdings{}, func(_ context.Context, u source.Unit) error {
			if u.Record != nil {
				recs++
				if recs%10000 == 0 {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					peak = max(peak, m.HeapAlloc)
				}
			}
			return nil
		})
		if err != nil || recs != n {
			b.Fatal(err, recs)
		}
		b.ReportMetric(float64(peak-min(peak, before.HeapAlloc))/(1<<20), "heap-MiB")
		b.ReportMetric(float64(size)/(1<<20), "list-MiB")
	}
}
