package state

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"
)

// onStores runs bench as sub-benchmarks "sqlite" (a file on the test's
// temporary directory) and "postgres" (a database of Debian's server,
// started for it on 127.0.0.1), each with a new, empty store, and reports
// the bytes the store grew by per resource it holds at the end (the file's
// size, or the database's), for the capacity arithmetic of docs/SCALE.md.
func onStores(b *testing.B, bench func(b *testing.B, s *Store)) {
	b.Run("sqlite", func(b *testing.B) {
		s, path := openTemp(b)
		bench(b, s)
		reportSize(b, s, func() int64 {
			var n int64
			for _, f := range []string{path, path + "-wal"} {
				if fi, err := os.Stat(f); err == nil {
					n += fi.Size()
				}
			}
			return n
		})
	})
	b.Run("postgres", func(b *testing.B) {
		s, server := openPostgresTemp(b)
		bench(b, s)
		reportSize(b, s, func() int64 {
			var n int64
			db, err := sql.Open("pgx", server)
			if err == nil {
				_ = db.QueryRow("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'").Scan(&n)
				db.Close()
			}
			return n
		})
	})
}

// reportSize reports size() divided by the resources s holds.
func reportSize(b *testing.B, s *Store, size func() int64) {
	n, err := s.CountResources(context.Background(), "", true)
	if err != nil || n == 0 {
		return
	}
	b.ReportMetric(float64(size())/float64(n), "bytes/resource")
}

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
func BenchmarkPutResources(b *testing.B) { onStores(b, benchPutResources) }

func benchPutResources(b *testing.B, s *Store) {
	const batch = 500
	ctx := context.Background()
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
func BenchmarkLookup(b *testing.B) { onStores(b, benchLookup) }

func benchLookup(b *testing.B, s *Store) {
	const total = 50_000
	ctx := context.Background()
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
			onStores(b, func(b *testing.B, s *Store) { benchCommitBaseline(b, s, sinks) })
		})
	}
}

func benchCommitBaseline(b *testing.B, s *Store, sinks int) {
	const batch = 500
	ctx := context.Background()
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
}
