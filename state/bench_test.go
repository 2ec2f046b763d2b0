package state

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func benchResources(b *testing.B, prefix string, n int, run int64) []Resource {
	b.Helper()
	h := hashesOf(b, md5Hex+" "+sha256Hex)
	now := time.Now()
	rs := make([]Resource, n)
	for i := range rs {
		rs[i] = Resource{
			URI: fmt.Sprintf("http://example.com/%s/resource/%08d", prefix, i), Source: "http://example.com/",
			ResourceSet: "http://example.com/capabilitylist.xml", Length: 51200, Hashes: h,
			Type: "application/octet-stream", Lastmod: now, ChangeTime: now,
			Package: "http://example.com/dump/part-0001.zip", Outcome: OutcomeWritten, RunID: run,
		}
	}
	return rs
}

// BenchmarkPutResources measures upserts of new resources in batches of
// 500, one transaction each; it reports records/s.
func BenchmarkPutResources(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	s, _ := openTemp(b)
	run := mustRun(b, s)
	rs := benchResources(b, "put", batch, run)
	n := 0
	for b.Loop() {
		for i := range rs {
			rs[i].URI = fmt.Sprintf("http://example.com/put/resource/%010d", n)
			n++
		}
		if err := s.PutResources(ctx, rs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkLookup measures Resource lookups by URI from parallel goroutines
// in a store of 50,000 resources, half of them hits.
func BenchmarkLookup(b *testing.B) {
	const total = 50_000
	ctx := context.Background()
	s, _ := openTemp(b)
	run := mustRun(b, s)
	rs := benchResources(b, "lookup", total, run)
	for i := 0; i < total; i += 5000 {
		if err := s.PutResources(ctx, rs[i:i+5000]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			uri := rs[(i*7919)%total].URI
			if i%2 == 1 {
				uri += "/absent"
			}
			_, ok, err := s.Resource(ctx, "http://example.com/", uri)
			if err != nil {
				b.Error(err)
				return
			}
			if ok == (i%2 == 1) {
				b.Errorf("lookup %s: found = %v", uri, ok)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkCommitBaseline measures Commit of batches shaped as a
// baseline's: 500 new resources, each with its change record, for one sink
// (the default job's) and for several (each resource's deliveries
// cleared); it reports µs per resource.
func BenchmarkCommitBaseline(b *testing.B) {
	for _, sinks := range []int{1, 2} {
		b.Run(fmt.Sprintf("sinks=%d", sinks), func(b *testing.B) {
			const batch = 500
			ctx := context.Background()
			s, _ := openTemp(b)
			run := mustRun(b, s)
			rs := benchResources(b, "commit", batch, run)
			n := 0
			for b.Loop() {
				bt := Batch{Resources: rs}
				for i := range rs {
					rs[i].URI = fmt.Sprintf("http://example.com/commit/resource/%010d", n)
					n++
					r := &rs[i]
					bt.Changes = append(bt.Changes, ChangeRecord{URI: r.URI, Change: ChangeCreated, Datetime: r.ChangeTime, RunID: run,
						Package: r.Package, Source: r.Source, Length: r.Length, Hashes: r.Hashes, Type: r.Type})
					if sinks > 1 {
						bt.Delivered = append(bt.Delivered, Key{Source: r.Source, URI: r.URI})
					}
				}
				if err := s.Commit(ctx, bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(n), "µs/resource")
		})
	}
}
