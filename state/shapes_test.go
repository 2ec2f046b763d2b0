package state

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rsharvest/rsharvest/internal/testbin"
)

// TestCommitShapes: batches whose rows share some columns and not others
// (every pattern of eight fields, more patterns than the shapes kept, NULL
// in some rows and not in others, a row that differs in one field only)
// are stored as given, resources and changes alike, the second pass
// overwriting the first, in a file and in PostgreSQL.
func TestCommitShapes(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		s, _ := openTemp(t)
		testCommitShapes(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		server, stop, err := testbin.Postgres(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		s, err := Open(t.Context(), server)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		testCommitShapes(t, s)
	})
}

func testCommitShapes(t *testing.T, s *Store) {
	ctx := context.Background()
	run := mustRun(t, s)
	base := time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	md5 := hashesOf(t, md5Hex)
	all := hashesOf(t, md5Hex+" "+sha1Hex+" "+sha256Hex)
	const perBatch = 2*rowsPerInsert + 7 // two inserts of many rows and some of one
	// resource gives row i of a batch in pass p: each bit of pattern
	// makes one field vary from row to row, else it is the batch's.
	resource := func(p, pattern, i int) Resource {
		vary := func(bit int) bool { return pattern&(1<<bit) != 0 }
		r := Resource{URI: fmt.Sprintf("http://example.com/shapes/%d/%d", pattern, i), Source: "http://example.com/",
			ResourceSet: "set", Length: 10, Type: "text/plain", Package: "pkg", Outcome: OutcomeWritten,
			RunID: run, ETag: `"e"`, Verified: VerifiedHash, Lastmod: base, ChangeTime: base.Add(time.Duration(p) * time.Hour)}
		if p > 0 {
			r.Type, r.Package = "text/xml", "pkg2"
		}
		if vary(0) {
			r.ResourceSet = fmt.Sprintf("set%d", i%3)
		}
		if vary(1) {
			r.Length = int64(i)
		}
		if vary(2) && i%2 == 0 {
			r.Hashes = md5
		} else if vary(2) {
			r.Hashes = all
		}
		if vary(3) && i%4 == 1 {
			r.Lastmod = time.Time{}
		} else if vary(3) {
			r.Lastmod = base.Add(time.Duration(i) * time.Second)
		}
		if vary(4) && i%5 == 0 {
			r.Outcome, r.Deleted, r.Length = OutcomeDeleted, true, -1
		}
		if vary(5) && (i == rowsPerInsert-1 || i == rowsPerInsert+1) {
			r.Type = "application/pdf" // one row differs: the last of an insert, the second
		}
		if vary(6) {
			r.ETag = fmt.Sprintf(`"e%d"`, i)
		}
		if vary(7) && i%3 == 0 {
			r.RunID = 0
		}
		return r
	}
	var want []Resource
	var changes []ChangeRecord
	for p := range 2 {
		for pattern := range 1 << 8 {
			if pattern%17 != 0 && pattern != 255 && p == 1 {
				continue // the second pass overwrites some batches
			}
			if pattern%3 != 0 && pattern != 255 && pattern != 1 {
				continue // 86 patterns of 256, far more than maxShapes
			}
			var b Batch
			for i := range perBatch {
				r := resource(p, pattern, i)
				b.Resources = append(b.Resources, r)
				if r.RunID != 0 {
					b.Changes = append(b.Changes, ChangeRecord{URI: r.URI, Change: ChangeCreated, Datetime: r.ChangeTime, RunID: run,
						Package: r.Package, Source: r.Source, Length: r.Length, Hashes: r.Hashes, Type: r.Type, Lastmod: r.Lastmod})
				}
			}
			if err := s.Commit(ctx, b); err != nil {
				t.Fatalf("pass %d, pattern %08b: %v", p, pattern, err)
			}
			changes = append(changes, b.Changes...)
			if p == 1 || pattern%17 != 0 && pattern != 255 {
				want = append(want, b.Resources...)
			}
		}
	}
	for _, w := range want {
		got, ok, err := s.Resource(ctx, w.Source, w.URI)
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v", w.URI, ok, err)
		}
		w.Updated = got.Updated // the commit's time
		if d := diffResource(got, w); d != "" {
			t.Errorf("%s: %s", w.URI, d)
		}
	}
	n, err := s.CountResources(ctx, "http://example.com/", true)
	if err != nil || n != int64(len(want)) {
		t.Errorf("CountResources = %d, %v; want %d", n, err, len(want))
	}
	got, err := s.Changes(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(changes) {
		t.Fatalf("%d changes, want %d", len(got), len(changes))
	}
	for i, w := range changes {
		g := got[i]
		if g.URI != w.URI || g.Change != w.Change || !sameTime(g.Datetime, w.Datetime) || g.RunID != w.RunID || g.Package != w.Package ||
			g.Source != w.Source || g.Length != w.Length || !g.Hashes.Equal(w.Hashes) || g.Type != w.Type || !g.Lastmod.Equal(w.Lastmod) {
			t.Errorf("change %d = %+v, want %+v", i, g, w)
		}
	}
}
